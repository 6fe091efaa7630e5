"""``gradviz.nn.utils.stateless``: ``functional_call`` where older code imports it (torch now
points to ``torch.func.functional_call``, the same function here)."""

from ...func import functional_call

__all__ = ["functional_call"]
