"""AOT autograd: trace a captured graph and its backward into registry-op graphs ahead of
time, partition them into a forward and a backward graph, and run both as one autograd node
(AOTAutograd's role in torch.compile).

One concept per module: tracing.py (the dispatch mode recording ops), functionalize.py
(in-place ops and views as out-of-place ops), make_fx.py (`make_fx`), joint.py (forward and
backward traced as one graph), partitioners.py (splitting the joint graph), runtime.py (the
compiled autograd Function and the eager fallback), api.py (`aot_function`,
`aot_module_simplified`, the `aot_eager` backend).
"""
