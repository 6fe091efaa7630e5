"""Which ``gradviz.func`` transforms are running (innermost last).

Kept here, without imports, so ``Function.apply`` can test it cheaply and without import
cycles: ``gradviz.func`` pushes an entry per active ``vmap`` (its ``VmapInfo``) or
``grad``/``vjp``/``jacrev``/``jvp`` (the transform's name) and pops it on the way out.
"""

stack: list = []
