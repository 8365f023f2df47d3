"""The training snippets of PyTorch's data-parallel guide, run unchanged on fusegrad.

Started by `python -m fusegrad.distributed.run --nproc-per-node 2 seed_snippets.py`; every
rank prints its torchrun environment and, at the end, a checksum of its weights, which the test
compares across ranks (data parallelism keeps the replicas identical).
"""

import os

import fusegrad as torch
import fusegrad.distributed as dist
from fusegrad.utils.data import DataLoader, TensorDataset
from fusegrad.utils.data.distributed import DistributedSampler

dist.init_process_group(backend="gloo")
print("env", *(os.environ[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR",
                                       "MASTER_PORT")), flush=True)
torch.manual_seed(dist.get_rank())    # different data per rank; DDP syncs the weights
dataset = TensorDataset(torch.randn(64, 10), torch.randint(0, 3, (64,)))
dataloader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset, seed=0))
criterion = torch.nn.CrossEntropyLoss()
accumulation_steps = 2

# DataParallel
model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
model = torch.nn.DataParallel(model)
assert list(model.state_dict())[0] == "module.0.weight"

# DistributedDataParallel with gradient accumulation
model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i, (inputs, targets) in enumerate(dataloader):
    outputs = model(inputs)
    loss = criterion(outputs, targets)
    loss = loss / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        optimizer.step()
        optimizer.zero_grad()

# Gradients as views of the communication buckets
model = torch.nn.parallel.DistributedDataParallel(model.module, gradient_as_bucket_view=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for inputs, targets in dataloader:
    optimizer.zero_grad()
    criterion(model(inputs), targets).backward()
    optimizer.step()

checksum = float(sum(p.double().sum() for p in model.parameters()))
sums = [None] * dist.get_world_size()
dist.all_gather_object(sums, checksum)
assert sums == [checksum] * len(sums), sums
print(f"rank {dist.get_rank()} checksum {checksum:.12f}", flush=True)
dist.destroy_process_group()
