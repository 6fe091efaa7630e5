"""torch.is_inference_mode_enabled under inference_mode (nesting, inference_mode(False),
enable_grad inside, other threads, the decorator), against torch."""

from __future__ import annotations

import threading

import torch

import gradviz


def states(m):
    out = []
    x = m.ones(1, requires_grad=True)
    out.append(m.is_inference_mode_enabled())
    with m.no_grad():
        with m.inference_mode(False):  # turns grad mode on, as in torch
            out.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))
    with m.inference_mode():
        out.append((m.is_grad_enabled(), m.is_inference_mode_enabled(), (x * 2).requires_grad))
        with m.inference_mode(False):
            out.append((m.is_grad_enabled(), m.is_inference_mode_enabled(), (x * 2).requires_grad))
        out.append(m.is_inference_mode_enabled())
        with m.enable_grad():
            out.append((m.is_grad_enabled(), m.is_inference_mode_enabled()))
        seen = []
        thread = threading.Thread(target=lambda: seen.append(m.is_inference_mode_enabled()))
        thread.start()
        thread.join()
        out.append(seen)

    @m.inference_mode()
    def decorated():
        return m.is_grad_enabled(), m.is_inference_mode_enabled()

    out.append((decorated(), m.is_inference_mode_enabled(), m.is_grad_enabled()))
    try:
        with m.inference_mode():
            raise KeyError("inside")
    except KeyError:
        pass
    out.append((m.is_inference_mode_enabled(), m.is_grad_enabled()))
    return out


def test_inference_mode_flag_matches_torch():
    assert states(gradviz) == states(torch)
