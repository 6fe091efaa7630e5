"""``torch.utils.data`` for teaching code: ``Dataset``, ``TensorDataset``, ``Subset``,
``random_split``, ``ConcatDataset``, ``IterableDataset``, the samplers, ``DataLoader`` (batching
with ``default_collate``, shuffling with gradviz's generator, single process) and
``default_collate``/``default_convert``.

Examples
--------
>>> import gradviz as torch
>>> from gradviz.utils.data import DataLoader, TensorDataset
>>> dataset = TensorDataset(torch.arange(6.0).view(3, 2), torch.tensor([0, 1, 0]))
>>> [y for _, y in DataLoader(dataset, batch_size=2)]
[tensor([0, 1]), tensor([0])]
"""

from __future__ import annotations

import bisect
import collections.abc
import copy
import itertools
import math
import sys
import types
import warnings

import numpy as np

from .. import dtypes as _dtypes
from .. import ops as _ops
from .._tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset", "random_split",
           "get_worker_info",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate",
           "default_convert"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and ``__len__`` for a
    ``DataLoader`` with a sampler); ``a + b`` concatenates two datasets."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__``; a ``DataLoader`` batches
    what it yields, in order."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class ChainDataset(IterableDataset):
    """Several iterable datasets one after the other (``torch.utils.data.ChainDataset``)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from dataset

    def __len__(self):
        total = 0
        for dataset in self.datasets:
            if not isinstance(dataset, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(dataset)
        return total


def get_worker_info():
    """Information about the ``DataLoader`` worker process running this code: always None,
    as gradviz's ``DataLoader`` loads in the calling process (torch returns None there too),
    so an ``IterableDataset`` that shards by worker yields everything once."""
    return None


class ConcatDataset(Dataset):
    """The samples of several datasets one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx if dataset_idx == 0 else idx - self.cumulative_sizes[dataset_idx - 1]
        return self.datasets[dataset_idx][sample_idx]


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


# ---- samplers: the indices a DataLoader reads (random ones from gradviz's generator) ----------

class Sampler:
    """Yields indices of a dataset; subclasses define ``__iter__`` (and ``__len__``)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


_REPLACEMENT_CHUNK = 32  # indices drawn at once with replacement (torch's chunk)


class RandomSampler(Sampler):
    """The indices in a random order, or ``num_samples`` draws with ``replacement``."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError("replacement should be a boolean value, but got "
                            f"replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        if self.replacement:
            # Drawn lazily, 32 at a time as torch does: makemore's training loop asks for
            # num_samples=int(1e10) and only ever reads a few thousand.
            for _ in range(self.num_samples // _REPLACEMENT_CHUNK):
                yield from _ops.randint(0, n, (_REPLACEMENT_CHUNK,),
                                        generator=self.generator).tolist()
            yield from _ops.randint(0, n, (self.num_samples % _REPLACEMENT_CHUNK,),
                                    generator=self.generator).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from _ops.randperm(n, generator=self.generator).tolist()
        yield from _ops.randperm(n, generator=self.generator).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (CS231n's train/validation split of one dataset)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        for i in _ops.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights_tensor = _ops.as_tensor(weights, dtype=_dtypes.float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        draws = _ops.multinomial(self.weights, self.num_samples, self.replacement,
                                 generator=self.generator)
        yield from iter(draws.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if (not isinstance(batch_size, int) or isinstance(batch_size, bool)
                or batch_size <= 0):
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples merged by ``collate_fn``
    (``default_collate``): in order, ``shuffle``d (a new order each epoch, from gradviz's
    generator, so not torch's order), or in the order of a ``sampler`` or ``batch_sampler``;
    ``drop_last`` drops a last incomplete batch; ``batch_size=None`` yields the samples one by
    one (``default_convert``). An ``IterableDataset`` is batched in the order it yields.
    Loading happens in this process (``num_workers`` is accepted and ignored)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.num_workers = num_workers
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self._auto_collation = batch_sampler is not None or (self._iterable and batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def __iter__(self):
        if self._iterable:
            yield from self._iter_stream()
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])

    def _iter_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = (length // self.batch_size if self.drop_last
                          else -(-length // self.batch_size))
            return length
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)


def _submodule(name, doc, names):
    """``gradviz.utils.data.<name>``, a module holding ``names`` from this one (torch code
    imports ``torch.utils.data.sampler`` and ``torch.utils.data.dataloader``)."""
    module = types.ModuleType(f"{__name__}.{name}", doc)
    for item in names:
        setattr(module, item, globals()[item])
    module.__all__ = list(names)
    sys.modules[module.__name__] = module
    return module


sampler = _submodule("sampler", "The samplers, as ``torch.utils.data.sampler``.",
                     ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
                      "WeightedRandomSampler", "BatchSampler"])
dataloader = _submodule("dataloader", "``DataLoader`` and the collate functions, as "
                        "``torch.utils.data.dataloader``.",
                        ["DataLoader", "default_collate", "default_convert"])
dataset = _submodule("dataset", "The datasets, as ``torch.utils.data.dataset``.",
                     ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
                      "random_split"])
