"""``biject_to`` and ``transform_to``: a transform from unconstrained reals onto a constraint's
set, as ``torch.distributions.constraint_registry`` (optimise an unconstrained tensor, use
``transform_to(constraints.positive)(u)`` as a scale).

``biject_to(c)`` is bijective (for HMC-style samplers, which need the log-Jacobian);
``transform_to(c)`` need not be (``softmax`` onto the simplex). Both are registries:
``biject_to.register(MyConstraint, factory)`` adds a constraint class.
"""

import numbers

from . import constraints, transforms

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """A registry of ``constraint -> transform`` factories, looked up by constraint class."""

    def __init__(self):
        self._registry = {}
        super().__init__()

    def register(self, constraint, factory=None):
        """``register(constraint_class_or_instance, factory)``, or as a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _registered(*classes, registries=(biject_to, transform_to)):
    def register(factory):
        for registry in registries:
            for cls in classes:
                registry.register(cls, factory)
        return factory

    return register


@_registered(type(constraints.real))
def _transform_to_real(constraint):
    return transforms.identity_transform


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint):
    base = biject_to(constraint.base_constraint)
    return transforms.IndependentTransform(base, constraint.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint):
    base = transform_to(constraint.base_constraint)
    return transforms.IndependentTransform(base, constraint.reinterpreted_batch_ndims)


@_registered(constraints.greater_than, constraints.greater_than_eq)
def _transform_to_greater_than(constraint):
    # constraints.positive and nonnegative are greater_than(0.0) and greater_than_eq(0.0): exp
    # then a shift by 0, as torch
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.lower_bound, 1)])


@_registered(constraints.less_than)
def _transform_to_less_than(constraint):
    return transforms.ComposeTransform([transforms.ExpTransform(),
                                        transforms.AffineTransform(constraint.upper_bound, -1)])


@_registered(constraints.interval, constraints.half_open_interval)
def _transform_to_interval(constraint):
    lower_is_0 = isinstance(constraint.lower_bound, numbers.Number) and constraint.lower_bound == 0
    upper_is_1 = isinstance(constraint.upper_bound, numbers.Number) and constraint.upper_bound == 1
    if lower_is_0 and upper_is_1:
        return transforms.SigmoidTransform()
    loc = constraint.lower_bound
    scale = constraint.upper_bound - constraint.lower_bound
    return transforms.ComposeTransform([transforms.SigmoidTransform(), transforms.AffineTransform(loc, scale)])


@biject_to.register(type(constraints.simplex))
def _biject_to_simplex(constraint):
    return transforms.StickBreakingTransform()


@transform_to.register(type(constraints.simplex))
def _transform_to_simplex(constraint):
    return transforms.SoftmaxTransform()


@transform_to.register(type(constraints.lower_cholesky))
def _transform_to_lower_cholesky(constraint):
    return transforms.LowerCholeskyTransform()
