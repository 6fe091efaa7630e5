// A small autograd graph for the tests: loss = (x * w + b).sum() with w, b leaves.

export const TINY_GRAPH = {
  nodes: [
    { id: 4, name: "SumBackward0", kind: "builtin", label: "SumBackward0" },
    { id: 3, name: "AddBackward0", kind: "builtin", label: "" },
    { id: 2, name: "MulBackward0", kind: "builtin", label: "x * w" },
    { id: 1, name: "AccumulateGrad", kind: "accumulate_grad", label: "w" },
    { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "b" },
  ],
  edges: [
    { source: 4, target: 3, input_nr: 0 },
    { source: 3, target: 2, input_nr: 0 },
    { source: 3, target: 0, input_nr: 1 },
    { source: 2, target: 1, input_nr: 1 },
  ],
  roots: [4],
};
