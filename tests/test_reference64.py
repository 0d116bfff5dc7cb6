"""Where the verifier's float64 reference runs: on the device when its copy fits beside the candidate
(memory torch's allocator caches counts as free), on the host when it would not, and on the host after
the device runs out of memory for it, instead of dropping the float64 comparison."""

import torch

from akg_agent.verifier import reference


class Doubler(torch.nn.Module):
    """Twice its input; out of memory on the stand-in device ("meta"), as a full GPU would be."""

    def __init__(self, fail: type[Exception] = torch.OutOfMemoryError) -> None:
        super().__init__()
        self.fail = fail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "meta":
            raise self.fail("CUDA out of memory (stand-in)")
        return x * 2


def _gpu_memory(monkeypatch, free: int, reserved: int, allocated: int) -> None:
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 << 30))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocated)


def test_memory_the_allocator_caches_counts_as_free(monkeypatch):
    gib, cuda = 1 << 30, torch.device("cuda")
    _gpu_memory(monkeypatch, free=10 * gib, reserved=30 * gib, allocated=10 * gib)  # 20 GiB cached, unused
    assert reference.float64_home(cuda, 6 * gib) == cuda  # 24 GiB fits in 10 free + 20 cached
    assert reference.float64_home(cuda, 8 * gib).type == "cpu"  # 32 GiB does not
    _gpu_memory(monkeypatch, free=10 * gib, reserved=10 * gib, allocated=10 * gib)  # nothing cached
    assert reference.float64_home(cuda, 6 * gib).type == "cpu"
    assert reference.float64_home(torch.device("cpu"), 1 << 40).type == "cpu"


def test_float64_outputs_move_to_the_host_when_the_device_runs_out(monkeypatch):
    monkeypatch.setattr(reference, "float64_home", lambda device, size: torch.device("meta"))
    x = torch.randn(4, 8)
    (out,) = reference.float64_outputs(Doubler(), [x])
    assert out.dtype == torch.float64 and out.device.type == "cpu"
    assert torch.equal(out, x.double() * 2)


def test_a_trial_moves_the_float64_reference_to_the_host_once_and_keeps_it_there():
    details: dict = {}
    x = torch.randn(3, 5)
    ref64, (out,) = reference.float64_trial(Doubler(), [x], 1, torch.device("meta"), details)
    assert details["float64_reference_on"] == "cpu"
    assert out.dtype == torch.float64 and torch.equal(out, x.double() * 2)
    _, (again,) = reference.float64_trial(ref64, [x], 2, torch.device("meta"), details)  # later trials: host
    assert torch.equal(again, out)


def test_other_failures_drop_the_float64_comparison_without_moving():
    details: dict = {}
    _, out = reference.float64_trial(Doubler(fail=TypeError), [torch.randn(2)], 1, torch.device("meta"), details)
    assert out is None and "float64_reference_on" not in details
    assert reference.float64_trial(Doubler(), [torch.randn(2)], 1, torch.device("cpu"),
                                   {"float64_reference_on": "cpu"})[1] is not None


def test_out_of_memory_on_the_host_too_gives_no_float64_outputs(monkeypatch):
    class Always(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise torch.OutOfMemoryError("no memory anywhere (stand-in)")

    assert reference.float64_outputs(Always(), [torch.randn(2)]) is None
    _, out = reference.float64_trial(Always(), [torch.randn(2)], 1, torch.device("meta"), {})
    assert out is None


def test_a_trial_too_big_for_the_device_runs_on_the_host_from_the_start(monkeypatch):
    gib = 1 << 30
    _gpu_memory(monkeypatch, free=10 * gib, reserved=10 * gib, allocated=10 * gib)
    details: dict = {}
    x = torch.randn(3, 5)
    _, (out,) = reference.float64_trial(Doubler(), [x], 1, torch.device("cuda"), details, size=4 * gib)
    assert details["float64_reference_on"] == "cpu" and out.device.type == "cpu"
    assert torch.equal(out, x.double() * 2)


def test_timing_sets_bounded_by_device_memory() -> None:
    timing_sets = reference.timing_sets
    gib = 1 << 30
    assert timing_sets(3, 1 << 20, 80 * gib) == 3  # test-sized: the three sets asked for
    assert timing_sets(3, 6 * gib, 80 * gib) == 1  # a 6 GiB softmax input: one set (10 GiB is the bound)
    assert timing_sets(3, 4 * gib, 80 * gib) == 2
    assert timing_sets(3, 100 * gib, 80 * gib) == 1  # never none
    assert timing_sets(3, 6 * gib, None) == 3  # the host: not bounded here
