"""The reference answers (and one wrong answer each) of the course notebooks' exercises.

Each entry is the source of the notebook cell tagged ``answer:<name>``: the tests run the
checker on it directly (tests/course/test_checkers.py) and substitute it into the notebooks
(tests/course/test_course_notebooks.py). The notebooks themselves hold only placeholders.
"""

from __future__ import annotations

#: name -> (the variable the cell defines, reference source, wrong source)
ANSWERS = {
    "cube": ("Cube", '''
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x ** 2
''', '''
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x  # not save_for_backward: never released, never version-checked
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 3 * ctx.x ** 2
'''),
    "needs_input_grad": ("answer", "answer = (True, False, False)\n",
                         "answer = (True, True, False)\n"),
    "add_one": ("AddOne", '''
class AddOne(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.detach().numpy()[...] += 1
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output
''', '''
class AddOne(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.detach().numpy()[...] += 1
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output
'''),
    "buffers": ("answer", 'answer = {"C": True, "D": False}\n',
                'answer = {"C": False, "D": True}\n'),
    "run_order_prediction": ("answer", '''
answer = ["SumBackward0", "AddBackward0", "SinBackward0", "ExpBackward0", "MulBackward0",
          "AccumulateGrad", "AccumulateGrad"]
''', '''
answer = ["SumBackward0", "AddBackward0", "ExpBackward0", "SinBackward0", "MulBackward0",
          "AccumulateGrad", "AccumulateGrad"]
'''),
    "dependency_counts": ("answer", 'answer = {"MulBackward0": 2, "x": 1}\n',
                          'answer = {"MulBackward0": 1, "x": 1}\n'),
    "hook_order": ("answer", '''
answer = ["tensor hook on y", "pre-hook of y.grad_fn", "post-hook of y.grad_fn",
          "tensor hook on x", "post-accumulate hook on x"]
''', '''
answer = ["pre-hook of y.grad_fn", "tensor hook on y", "post-hook of y.grad_fn",
          "tensor hook on x", "post-accumulate hook on x"]
'''),
    "softplus": ("Softplus", '''
class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log(1 + torch.exp(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
''', '''
class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.log(1 + torch.exp(x))

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.exp(x)
'''),
    "reconnect": ("forward", '''
def forward(x, w1, w2):
    hidden = torch.tanh(x @ w1)
    return ((hidden @ w2) ** 2).mean()
''', '''
def forward(x, w1, w2):
    hidden = torch.tensor(torch.tanh(x @ w1).detach().numpy())
    return ((hidden @ w2) ** 2).mean()
'''),
    "ninja": ("d", '''
n = t["x"].shape[0]
d = {}
d["logprobs"] = torch.zeros_like(t["logprobs"])
d["logprobs"][range(n), t["y"]] = -1.0 / n
d["probs"] = d["logprobs"] / t["probs"]
d["counts_sum"] = (-d["probs"] * t["counts"] / t["counts_sum"] ** 2).sum(1, keepdim=True)
d["counts"] = d["probs"] / t["counts_sum"] + d["counts_sum"]
d["logits"] = d["counts"] * t["counts"]
d["W2"] = t["a"].T @ d["logits"]
d["b2"] = d["logits"].sum(0)
d["a"] = d["logits"] @ t["W2"].T
d["h"] = d["a"] * (1 - t["a"] ** 2)
d["W1"] = t["x"].T @ d["h"]
d["b1"] = d["h"].sum(0)
''', '''
n = t["x"].shape[0]
d = {}
d["logprobs"] = torch.zeros_like(t["logprobs"])
d["logprobs"][range(n), t["y"]] = -1.0 / n
d["probs"] = d["logprobs"] / t["probs"]
d["counts_sum"] = (-d["probs"] * t["counts"] / t["counts_sum"] ** 2).sum(1, keepdim=True)
d["counts"] = d["probs"] / t["counts_sum"]  # forgets the path through counts_sum
d["logits"] = d["counts"] * t["counts"]
d["W2"] = t["a"].T @ d["logits"]
d["b2"] = d["logits"].sum(0)
d["a"] = d["logits"] @ t["W2"].T
d["h"] = d["a"] * (1 - t["a"] ** 2)
d["W1"] = t["x"].T @ d["h"]
d["b1"] = d["h"].sum(0)
'''),
    "torch_silu": ("SiLU", '''
class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))
''', '''
class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * s * (1 - s)
'''),
    "rollup": ("answer", 'answer = "blocks"\n', 'answer = "encoder"\n'),
    "run_order": ("run_order", '''
import heapq

def run_order(root):
    # 1. dependency counts: how many edges reach each node from nodes that will run
    dependencies, seen, stack = {}, {root}, [root]
    while stack:
        node = stack.pop()
        for successor, _ in node.next_functions:
            if successor is None:
                continue
            dependencies[successor] = dependencies.get(successor, 0) + 1
            if successor not in seen:
                seen.add(successor)
                stack.append(successor)
    # 2. the ready queue: the highest sequence number first
    ready = [(-root._sequence_nr(), 0, root)]
    order, pushed = [], 1
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node.name())
        for successor, _ in node.next_functions:
            if successor is None:
                continue
            dependencies[successor] -= 1
            if dependencies[successor] == 0:
                heapq.heappush(ready, (-successor._sequence_nr(), pushed, successor))
                pushed += 1
    return order
''', '''
def run_order(root):
    order, queue, seen = [], [root], {root}
    while queue:  # breadth first: ignores dependency counts and sequence numbers
        node = queue.pop(0)
        order.append(node.name())
        for successor, _ in node.next_functions:
            if successor is not None and successor not in seen:
                seen.add(successor)
                queue.append(successor)
    return order
'''),
    "reference_buffers": ("answer", "answer = (None, None)\n",
                          "answer = ('a buffer', None)\n"),
}
