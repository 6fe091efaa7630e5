"""``torch.utils.data`` for teaching code: ``Dataset``, ``TensorDataset``, ``Subset``,
``random_split``, ``DataLoader`` (batching with ``default_collate``, shuffling with gradviz's
generator, single process) and ``default_collate``/``default_convert``.

Examples
--------
>>> import gradviz as torch
>>> from gradviz.utils.data import DataLoader, TensorDataset
>>> dataset = TensorDataset(torch.arange(6.0).view(3, 2), torch.tensor([0, 1, 0]))
>>> [y for _, y in DataLoader(dataset, batch_size=2)]
[tensor([0, 1]), tensor([0])]
"""

from __future__ import annotations

import collections.abc
import copy
import math
import warnings

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import Tensor

__all__ = ["Dataset", "TensorDataset", "Subset", "random_split", "DataLoader", "default_collate",
           "default_convert"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and ``__len__`` for a
    ``DataLoader`` with a sampler)."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")


class TensorDataset(Dataset):
    """Samples ``tuple(t[index] for t in tensors)`` of tensors sharing their first dim."""

    def __init__(self, *tensors):
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].size(0)


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping ``Subset`` s of the given lengths (or fractions
    summing to 1), in an order drawn from gradviz's generator."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, fraction in enumerate(lengths):
            if fraction < 0 or fraction > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(math.floor(len(dataset) * fraction))
        for i in range(len(dataset) - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
        lengths = sizes
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = _ops.randperm(sum(lengths), generator=generator).tolist()
    subsets, offset = [], 0
    for length in lengths:
        subsets.append(Subset(dataset, indices[offset:offset + length]))
        offset += length
    return subsets


def default_convert(data):
    """numpy arrays and scalars to tensors, inside mappings and sequences too (tuples become
    lists, as in torch); everything else unchanged."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)):
        if data.dtype.kind in "OSU":
            return data
        return _ops.as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _same_kind(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _same_sequence(data, [default_convert(d) for d in data])
    return data


def _same_kind(mapping, items):
    """``items`` (a dict) as a mapping of ``mapping``'s type, where that type allows it."""
    try:
        if isinstance(mapping, collections.abc.MutableMapping):
            clone = copy.copy(mapping)
            clone.update(items)
            return clone
        return type(mapping)(items)
    except TypeError:
        return items


def _same_sequence(sequence, items):
    try:
        if isinstance(sequence, collections.abc.MutableSequence):
            clone = copy.copy(sequence)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(sequence)(items)
    except TypeError:
        return items


def default_collate(batch):
    """Merge a list of samples into a batch: tensors stacked along a new first dim, numbers
    into a tensor (floats as float64), numpy arrays as tensors, and mappings and sequences
    collated field by field (tuples become lists, as in torch)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _ops.stack(batch, 0)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "OSU":
        return default_collate([_ops.as_tensor(b) for b in batch])
    if isinstance(elem, np.generic) and elem.dtype.kind not in "OSU":
        return _ops.as_tensor(np.array(batch))
    if isinstance(elem, float):
        return _ops.tensor(batch, dtype=_dtypes.float64)
    if isinstance(elem, int):
        return _ops.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _same_kind(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        collated = [default_collate(samples) for samples in transposed]
        if isinstance(elem, tuple):
            return collated
        return _same_sequence(elem, collated)
    raise TypeError("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples merged by ``collate_fn``
    (``default_collate``), in order or ``shuffle``d (a new order each epoch, from gradviz's
    generator, so not torch's order); ``drop_last`` drops a last incomplete batch;
    ``batch_size=None`` yields the samples one by one (``default_convert``). Loading happens in
    this process (``num_workers`` is accepted and ignored)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, generator=None, **kwargs):
        if sampler is not None or batch_sampler is not None:
            raise NotImplementedError("DataLoader: samplers are not supported by gradviz; use "
                                      "shuffle=True or a Subset")
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.num_workers = num_workers
        self.drop_last = drop_last
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if batch_size is not None else default_convert
        self.collate_fn = collate_fn

    def _order(self):
        if self.shuffle:
            return _ops.randperm(len(self.dataset), generator=self.generator).tolist()
        return range(len(self.dataset))

    def __iter__(self):
        order = self._order()
        if self.batch_size is None:
            for index in order:
                yield self.collate_fn(self.dataset[index])
            return
        batch = []
        for index in order:
            batch.append(self.dataset[index])
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self.batch_size is None:
            return len(self.dataset)
        if self.drop_last:
            return len(self.dataset) // self.batch_size
        return -(-len(self.dataset) // self.batch_size)
