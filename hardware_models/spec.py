"""Hardware models: per-target data files (TOML), the host CPU detected at run time, and
calibrated profiles measured on the present device (preferred when they exist)."""

from __future__ import annotations

import json
import os
import platform
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ir.errors import AkgError

DATA_DIR = Path(__file__).parent
SECTIONS = ("chip", "compute.tensor", "compute.vector", "memory", "library")


@dataclass(frozen=True)
class Figure:
    value: float
    source: str
    note: str = ""


@dataclass
class HardwareModel:
    name: str
    vendor: str
    kind: str
    description: str
    arch: str
    sources: dict[str, str]
    figures: dict[str, dict[str, Figure]]  # section -> key -> figure
    numerics: dict[str, str] = field(default_factory=dict)
    calibrated_from: str | None = None

    # --- typed accessors
    def fig(self, section: str, key: str) -> Figure | None:
        return self.figures.get(section, {}).get(key)

    def chip(self, key: str) -> float:
        f = self.fig("chip", key)
        if f is None:
            raise KeyError(f"{self.name}: no chip.{key}")
        return f.value

    def peak(self, unit: str, dtype: str) -> float | None:
        f = self.fig(f"compute.{unit}", dtype)
        return f.value if f is not None else None

    @property
    def units(self) -> int:
        return int(self.chip("units"))

    @property
    def core_cache_bytes(self) -> int:
        """A CPU core's own cache (its L2, `local_mem_per_group_bytes`); 0 on other targets or where unknown."""
        f = self.fig("chip", "local_mem_per_group_bytes") if self.kind == "cpu" else None
        return int(f.value) if f is not None else 0

    @property
    def dram_bw(self) -> float:
        return self.figures["memory"]["dram_bw"].value

    @property
    def l2_bw(self) -> float:
        return self.figures["memory"]["l2_bw"].value

    @property
    def launch_overhead(self) -> float:
        return self.chip("launch_overhead_s")

    def source_of(self, f: Figure) -> str:
        return self.sources.get(f.source, f.source)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "vendor": self.vendor, "kind": self.kind, "description": self.description,
                "arch": self.arch, "numerics": self.numerics,
                "calibrated_from": self.calibrated_from, "sources": self.sources,
                "figures": {s: {k: f.__dict__ for k, f in d.items()} for s, d in self.figures.items()}}


def _figures(doc: dict[str, Any], path: str, sources: dict[str, str]) -> dict[str, dict[str, Figure]]:
    out: dict[str, dict[str, Figure]] = {}
    for section in SECTIONS:
        node: Any = doc
        for part in section.split("."):
            node = node.get(part, {})
        figs: dict[str, Figure] = {}
        for key, v in node.items():
            if not isinstance(v, dict):
                continue  # labels such as unit_name
            if "value" not in v or "source" not in v:
                raise ValueError(f"{path}: {section}.{key} needs a value and a source")
            if v["source"] not in sources:
                raise ValueError(f"{path}: {section}.{key} cites unknown source {v['source']!r}")
            figs[key] = Figure(float(v["value"]), v["source"], v.get("note", ""))
        out[section] = figs
    return out


def load_file(path: Path) -> HardwareModel:
    doc = tomllib.loads(path.read_text())
    sources = dict(doc.get("sources", {}))
    return HardwareModel(doc["name"], doc["vendor"], doc["kind"], doc["description"], doc.get("arch", ""),
                         sources, _figures(doc, str(path), sources),
                         dict(doc.get("numerics", {})))


def target_names() -> list[str]:
    return sorted([p.stem for p in DATA_DIR.glob("*.toml")] + ["cpu"])


def cache_dir() -> Path:
    return Path(os.environ.get("AKG_CACHE_DIR", Path.home() / ".cache" / "akg"))


def calibrated_path(name: str) -> Path:
    return cache_dir() / "hardware" / f"{name}.calibrated.json"


def load_target(name: str, calibrated: bool = True) -> HardwareModel:
    """The model for `name`; a calibrated profile measured on this kind of device wins where present."""
    if name == "cpu":
        model = detect_cpu()
    else:
        path = DATA_DIR / f"{name}.toml"
        if not path.is_file():
            raise AkgError(f"unknown target {name!r}; choose from {', '.join(target_names())} (akg hw list)")
        model = load_file(path)
    cal = calibrated_path(name)
    if calibrated and cal.is_file():
        model = apply_calibration(model, json.loads(cal.read_text()))
    return model


def target_for_device(device_type: str, device_name: str = "") -> str:
    """The hardware model for a torch device: the host CPU, or the GPU model whose name appears in the
    device's name ("NVIDIA H100 80GB HBM3" -> h100)."""
    if device_type == "cpu":
        return "cpu"
    flat = re.sub(r"[^a-z0-9]", "", device_name.lower())
    found = [n for n in target_names() if n != "cpu" and re.sub(r"[^a-z0-9]", "", n) in flat]
    if not found:
        raise AkgError(f"no hardware model matches {device_type} device {device_name!r}: name a target "
                       f"({', '.join(target_names())})")
    return max(found, key=len)


def apply_calibration(model: HardwareModel, doc: dict[str, Any]) -> HardwareModel:
    """Overlay measured figures (keys like 'memory.dram_bw', 'compute.tensor.bf16')."""
    figures = {s: dict(d) for s, d in model.figures.items()}
    sources = dict(model.sources)
    label = f"calibrated on {doc.get('device', '?')} at {doc.get('date', '?')} (akg hw calibrate)"
    sources["calibrated"] = label
    for dotted, value in doc.get("figures", {}).items():
        section, key = dotted.rsplit(".", 1)
        if section not in figures:
            raise ValueError(f"calibration names unknown section {section!r}")
        old = figures[section].get(key)
        note = f"replaces {old.value:.4g} ({old.source})" if old is not None else ""
        figures[section][key] = Figure(float(value), "calibrated", note)
    return replace(model, figures=figures, sources=sources, calibrated_from=label)


# --- the host CPU, filled in at run time
def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _cache_size(text: str) -> int:
    m = re.match(r"(\d+)([KMG]?)", text)
    if not m:
        return 0
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]


ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
             "amx_bf16", "asimd", "sve")  # what the C++ backend's -march=native code and the library's paths use


def _cpu_facts(cpuinfo: str) -> tuple[set[str], str, int]:
    """The vector extensions (x86 `flags`, Arm `Features`), the model name and the cores this process may use."""
    m = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", cpuinfo, re.M)
    name = (re.search(r"^model name\s*:\s*(.*)$", cpuinfo, re.M) or [None, platform.processor()])[1]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return set(m.group(1).split()) if m else set(), (name or platform.machine()).strip(), cores


def host_cpu_id() -> str:
    """This host's CPU as its timings depend on it: the model name, the cores this process may use and the
    vector extensions. A cloud VM's generic model name ("Intel Xeon Processor") covers hosts with and
    without AMX or AVX-512 BF16, whose library GEMMs differ several times over."""
    flags, name, cores = _cpu_facts(_read("/proc/cpuinfo"))
    return f"{name}, {cores} cores, " + (" ".join(f for f in ISA_FLAGS if f in flags) or "no vector extensions named")


def detect_cpu() -> HardwareModel:
    cpuinfo = _read("/proc/cpuinfo")
    flags, model_name, cores = _cpu_facts(cpuinfo)
    intel = re.search(r"^vendor_id\s*:\s*GenuineIntel", cpuinfo, re.M) is not None
    simd_bits = 512 if "avx512f" in flags else 256 if "avx2" in flags else 128
    mhz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    ghz = int(mhz) / 1e6 if mhz.isdigit() else 0.0
    if not ghz:
        m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M)
        ghz = float(m.group(1)) / 1000 if m else 2.0
    caches = {}
    for idx in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        level, ctype = _read(f"{idx}/level"), _read(f"{idx}/type")
        if ctype in ("Data", "Unified"):
            caches[f"l{level}"] = _cache_size(_read(f"{idx}/size"))
    lanes = simd_bits // 32
    bf16 = bool(flags & {"avx512_bf16", "amx_bf16"})
    f32 = cores * ghz * 1e9 * lanes * 2 * 2  # 2 FMA pipes x 2 flops per FMA
    src = "detected"
    note = f"{cores} cores x {ghz:.2f} GHz x {lanes} f32 lanes x 2 FMA pipes x 2"
    figures = {
        "chip": {
            "units": Figure(cores, src, "cores available to this process"),
            "simd_width": Figure(lanes, src, f"f32 lanes ({simd_bits}-bit SIMD)"),
            "clock_ghz": Figure(ghz, src),
            "max_threads_per_unit": Figure(1, src), "max_threads_per_group": Figure(1, src),
            "max_groups_per_unit": Figure(1, src),
            "registers_per_unit": Figure(32 * lanes, src, "32 vector registers"),
            # the register tile's model (cost.register_tile_rate): x86-64 has 16 vector registers below
            # AVX-512, 32 with it; AArch64 has 32
            "vector_registers": Figure(32 if simd_bits == 512 or platform.machine() in ("aarch64", "arm64") else 16,
                                       src, "architectural vector registers"),
            "fma_units": Figure(2, "estimate", "FMA pipes per core"),
            "load_units": Figure(2, "estimate", "vector loads per cycle per core"),
            "fma_latency_cycles": Figure(4, "estimate", "cycles from one FMA to the next on its accumulator"),
            "local_mem_per_unit_bytes": Figure(caches.get("l1", 32768), src, "L1 data cache"),
            "local_mem_per_group_bytes": Figure(caches.get("l2", 1 << 20), src, "L2 cache"),
            "l2_bytes": Figure(caches.get("l3", caches.get("l2", 1 << 22)), src, "last-level cache"),
            "dram_bytes": Figure(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), src),
            "launch_overhead_s": Figure(2e-6, "estimate", "OpenMP fork/join, order of magnitude"),
            # non-temporal stores for outputs past the last-level cache: measured a loss on this project's
            # Intel Xeon host (every memory-bound row and pointwise kernel tried), a gain on its AMD EPYC one
            "stream_stores": Figure(int(not intel), "measured", "non-temporal stores pay for large outputs"),
        },
        "compute.tensor": {"bf16": Figure(2 * f32, src, "AVX512-BF16 dot products")} if bf16 else {},
        "compute.vector": {"f32": Figure(f32, src, note), "f64": Figure(f32 / 2, src),
                           "f16": Figure(f32, src, "converted to f32"), "bf16": Figure(f32, src, "converted to f32")},
        # the library's GEMM (MKL or oneDNN through torch) as a fraction of compute.vector: the cost
        # model's default strategy compares it with a backend's own GEMM (manifest gemm_efficiency)
        "library": {
            "gemm_f32": Figure(0.8, "measured", "vendor sgemm at compute-bound sizes"),
            "gemm_bf16": (Figure(0.8, "estimate", "BF16 dot-product instructions") if bf16 else
                          Figure(0.005, "measured", "no BF16 instructions: the library's bf16 GEMM takes a slow path")),
            "call_s": Figure(1e-5, "estimate", "torch's dispatch of one call from a module's forward"),
        },
        "memory": {
            "dram_bw": Figure(min(cores, 8) * 10e9, "estimate", "10 GB/s per core up to 8; run akg hw calibrate"),
            "l2_bw": Figure(cores * ghz * 1e9 * 32, "estimate", "32 B/cycle/core"),
            "local_bw_per_unit": Figure(ghz * 1e9 * 128, "estimate", "two 64 B loads per cycle"),
        },
    }
    sources = {"detected": "read from /proc/cpuinfo and /sys on this machine",
               "measured": "measured on this project's machines (benchmarks/results, the CPU tunes' strategies)",
               "estimate": "akg estimate; replace by `akg hw calibrate --target cpu`"}
    return HardwareModel("cpu", "host", "cpu", f"host CPU: {model_name.strip()}", platform.machine(),
                         sources, figures, {"conv_f32": "f32", "matmul_f32": "f32"})
