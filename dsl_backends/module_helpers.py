"""Python helpers a written module carries where its steps need them (text, pasted after its imports),
and the tests that say which steps do."""

from __future__ import annotations

from ir.kernel.ir import Buf, LibraryCall
from ir.types import DTYPES

HUGE_PAGE_MIN_BYTES = 32 << 20

HUGE_EMPTY = '''
_AKG_HUGE = 1 << 21


def _akg_madvise_huge():
    import ctypes
    import sys
    if not sys.platform.startswith("linux"):
        return None
    try:
        f = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    f.argtypes, f.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int
    return f


_AKG_MADVISE = _akg_madvise_huge()


def _akg_empty(shape, dtype, device, nbytes):
    """torch.empty, on 2 MiB-aligned host memory marked for huge pages (MADV_HUGEPAGE): the kernel's first
    writes fault once per 2 MiB instead of once per 4 KiB. A view of a slightly larger byte buffer."""
    if device.type != "cpu" or _AKG_MADVISE is None:
        return torch.empty(shape, dtype=dtype, device=device)
    raw = torch.empty(nbytes + _AKG_HUGE, dtype=torch.uint8)
    off = -raw.data_ptr() % _AKG_HUGE
    _AKG_MADVISE(raw.data_ptr() + off, (nbytes + _AKG_HUGE - off) // _AKG_HUGE * _AKG_HUGE, 14)  # inside raw
    return raw[off:off + nbytes].view(dtype).view(shape)
'''


EMBEDDING_GRAD = '''

def _akg_embedding_grad(grad, indices, rows):
    """torch's embedding_dense_backward (no padding index, no frequency scaling) as zeros and one index_add_:
    on a GPU a memset and an atomic scatter in fp32, rounded once as torch rounds, where torch sorts the
    indices first (about 15 kernels per embedding in a BERT step on the H200); on the host a large fp32
    gradient on 2 MiB pages (first-touch page faults were most of torch's call). torch's own op where
    deterministic algorithms are asked for (atomic sums run in no fixed order) and for small host ones."""
    width = grad.shape[-1]
    if grad.is_cuda and not torch.are_deterministic_algorithms_enabled():
        out = torch.zeros((rows, width), dtype=torch.float32, device=grad.device)
        out.index_add_(0, indices.reshape(-1), grad.reshape(-1, width).float())
        return out if grad.dtype == torch.float32 else out.to(grad.dtype)
    nbytes = rows * width * grad.element_size()
    if grad.device.type != "cpu" or grad.dtype not in (torch.float32, torch.float64) or nbytes < HUGE_MIN_BYTES:
        return torch.ops.aten.embedding_dense_backward(grad, indices, rows, -1, False)
    out = _akg_empty((rows, width), grad.dtype, grad.device, nbytes)
    out.zero_()  # index_add_ as fast as torch's op over a warm heap; index_put_ with accumulation took 1.5x
    return out.index_add_(0, indices.reshape(-1), grad.reshape(-1, width))
'''.replace("HUGE_MIN_BYTES", str(HUGE_PAGE_MIN_BYTES))


NAN_ROWS = '''
import weakref

_AKG_ROWS = {}


def _akg_nan_rows(mask, out, held):
    """A written softmax's answer where a query's every score is -inf: NaN (torch's attention answers 0).
    Which queries are so is found once per mask and version: layers reading one mask (T5's bias, computed
    each call) share it, and a mask the module holds (`held`: BERT's padding mask, a constant dynamo kept) is
    looked at once, a change in place (load_state_dict) being a new version. Where no query is (read back
    on the host, except for a GPU mask computed each call: a sync a call), no kernel puts NaN back."""
    try:
        stamp = (mask._version, mask.data_ptr(), tuple(mask.shape), tuple(mask.stride()))
    except RuntimeError:  # an inference tensor counts no versions: not cached
        stamp = None
    key = id(mask)
    hit = _AKG_ROWS.get(key) if stamp is not None else None
    if hit is not None and hit[0]() is mask and hit[1] == stamp:
        rows = hit[2]
    else:
        rows = mask.amax(-1, keepdim=True) == float("-inf")  # one pass, no mask-sized temporary
        read = not mask.is_cuda or (held and not torch.cuda.is_current_stream_capturing())
        if read and not bool(rows.any()):
            rows = False
        if stamp is not None and (read or not held):
            _AKG_ROWS[key] = (weakref.ref(mask, lambda _, k=key: _AKG_ROWS.pop(k, None)), stamp, rows)
    return out if rows is False else torch.where(rows, float("nan"), out)
'''


def state_mask(step: LibraryCall) -> bool:
    """An attention whose written softmax answers NaN on fully masked rows, its mask a tensor the module
    holds (`_akg_nan_rows`)."""
    return step.op == "attention" and bool(step.attrs.get("nan_rows")) and len(step.args) > 3 \
        and step.args[3] is not None and step.args[3].role == "param" and not step.attrs.get("causal")


def embedding_grad(step: LibraryCall) -> bool:
    """An embedding's gradient (an opaque `embedding_dense_backward`) without a padding index or frequency
    scaling: `_akg_embedding_grad` writes it."""
    at = step.attrs
    if at.get("target") != "aten.embedding_dense_backward.default" or at.get("kwargs"):
        return False
    args = list(at["args"])
    return len(args) == 5 and args[3] == -1 and args[4] is False and isinstance(args[2], int)


def huge_allocation(b: Buf) -> int:
    """The byte size of a kernel output that `_akg_empty` allocates (0: plain torch.empty): static shapes
    of at least HUGE_PAGE_MIN_BYTES."""
    if not all(isinstance(d, int) for d in b.shape):
        return 0
    size = b.numel * DTYPES[b.dtype].itemsize
    return size if size >= HUGE_PAGE_MIN_BYTES else 0


LAST_WEIGHTS = '''
import weakref

_AKG_LAST = {}


def _akg_last(w, fmt):
    """A convolution's weight in channels-last `fmt`, converted once per version of it: torch converts a
    channels-first weight beside a channels-last input on every call (ResNet-18's at 2 images, ~0.8 ms a
    call on a 2-core host). A weight changed in place (an optimizer step, load_state_dict) has a new
    version, one given new storage a new address; either is converted again. A weight autograd follows is
    converted each call, in the graph."""
    if w.requires_grad and torch.is_grad_enabled():
        return w.contiguous(memory_format=fmt)
    try:
        stamp = (w._version, w.data_ptr(), fmt)
    except RuntimeError:  # an inference tensor counts no versions: not cached
        return w.contiguous(memory_format=fmt)
    key = id(w)
    hit = _AKG_LAST.get(key)
    if hit is not None and hit[0]() is w and hit[1] == stamp:
        return hit[2]
    out = w.contiguous(memory_format=fmt)
    _AKG_LAST[key] = (weakref.ref(w, lambda _, k=key: _AKG_LAST.pop(k, None)), stamp, out)
    return out
'''


def last_weight(step: LibraryCall) -> bool:
    """A convolution over channels-last operands whose weight `_akg_last` converts."""
    return step.op in ("conv", "conv_transpose") and bool(step.attrs.get("channels_last"))


def nan_rows(step: LibraryCall) -> bool:
    """An attention whose written softmax answers NaN on fully masked rows, its mask a float one
    (`_akg_nan_rows`)."""
    mask = step.args[3] if step.op == "attention" and len(step.args) > 3 else None
    return bool(step.attrs.get("nan_rows")) and mask is not None and mask.dtype != "bool"
