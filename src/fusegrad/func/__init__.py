"""`fusegrad.func` (PyTorch's `torch.func`): composable transforms of Python functions.

`grad`, `grad_and_value`, `vjp`, `jvp`, `linearize`, `jacrev`, `jacfwd` and `hessian` run on
fusegrad's reverse-mode tape (`autograd.grad` with `create_graph=True`), so they compose with
each other and with `vmap`; `vmap` runs the function once per example and stacks the results;
`functional_call` and `stack_module_state` run modules with other tensors as their state;
`jacfwd` (and `hessian`) build their Jacobians column by column, as forward mode does;
`functionalize` runs the function as it is (the values and input writes PyTorch's gives).
The design is in docs/architecture.md ("Function transforms").
"""

from ._functional_call import functional_call, stack_module_state
from ._jacobians import hessian, jacfwd, jacrev
from ._transforms import grad, grad_and_value, jvp, linearize, vjp
from ._utils import debug_unwrap, functionalize, replace_all_batch_norm_modules_
from ._vmap import vmap

__all__ = ["debug_unwrap", "functional_call", "functionalize", "grad", "grad_and_value",
           "hessian", "jacfwd", "jacrev", "jvp", "linearize", "replace_all_batch_norm_modules_",
           "stack_module_state", "vjp", "vmap"]

# Named where users reach them, as PyTorch names its own `torch.func`.
for _fn in (debug_unwrap, functional_call, functionalize, grad, grad_and_value, hessian, jacfwd,
            jacrev, jvp, linearize, replace_all_batch_norm_modules_, stack_module_state, vjp,
            vmap):
    _fn.__module__ = __name__
del _fn
