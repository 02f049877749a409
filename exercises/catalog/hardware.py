"""Hardware records: GPUs, links (NICs and host links), SSDs and NVLink domains.

Loaded from `gpus.toml`, `links.toml`, `drives.toml` and `domains.toml` by
`exercises.catalog.loader`; each dataclass's fields are also its file's schema.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GPU:
    """One accelerator. FLOP rates are dense (no 2:4 sparsity); capacity is the marketed size."""

    name: str
    bf16_dense_tflops: float
    fp8_dense_tflops: float | None  # None where the part has no FP8 tensor cores (A100)
    hbm_gb: float
    hbm_tbps: float
    sms: int
    l2_mb: float
    nvlink_gbps: float  # per GPU, both directions summed
    # Total memory nvidia-smi reports, in MiB (H100 SXM 81,559; H200 143,771): more than the
    # marketed GB. None where the catalog has no verified reading.
    hbm_reported_mib: float | None = None
    # Total memory the CUDA driver gives a process (cudaMemGetInfo), in MiB (H100 SXM 81,090): what
    # an engine sizes its pools from and prints. None where the catalog has no verified reading.
    hbm_driver_total_mib: float | None = None
    # Non-tensor FP32 rate (CUDA-core FMAs, 2 FLOPs each), TFLOP/s: what work done outside the
    # tensor cores runs at (H100 SXM 66.9). None where the catalog has no sourced figure.
    fp32_tflops: float | None = None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def fp32_flops(self) -> float | None:
        """Non-tensor (CUDA-core) FP32 rate in FLOP/s, or None."""
        return None if self.fp32_tflops is None else self.fp32_tflops * 1e12

    @property
    def bf16_flops(self) -> float:
        """Dense BF16 tensor-core rate in FLOP/s."""
        return self.bf16_dense_tflops * 1e12

    @property
    def fp8_flops(self) -> float | None:
        """Dense FP8 tensor-core rate in FLOP/s, or None."""
        return None if self.fp8_dense_tflops is None else self.fp8_dense_tflops * 1e12

    @property
    def hbm_bytes(self) -> float:
        """Capacity under the shared convention: the marketed GB read as 10^9 bytes."""
        return self.hbm_gb * 1e9

    @property
    def hbm_reported_bytes(self) -> float | None:
        """What the driver reports as total memory, in bytes (MiB * 2^20), or None.

        The alternative to `hbm_bytes` for exercises that size pools from real memory: an H200
        reports 143,771 MiB = 150.75e9 B = 140.4 GiB, against the marketed 141 GB.
        """
        return None if self.hbm_reported_mib is None else self.hbm_reported_mib * 2**20

    @property
    def hbm_driver_total_bytes(self) -> float:
        """Total memory as the CUDA driver reports it to a process, in bytes (MiB * 2^20).

        What vLLM multiplies by gpu_memory_utilization and logs as total_gpu_memory: an H100 80GB
        gives 81,090 MiB = 85.03e9 B = 79.19 GiB, below nvidia-smi's 81,559 MiB and above the
        marketed 80e9 B. Raises for a GPU without a verified reading rather than guessing one.
        """
        if self.hbm_driver_total_mib is None:
            raise ValueError(f"{self.name}: the catalog has no driver-reported total memory "
                             "(hbm_driver_total_mib); add a sourced reading before using it")
        return self.hbm_driver_total_mib * 2**20

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_tbps * 1e12

    @property
    def ridge_bf16(self) -> float:
        """Arithmetic intensity (FLOP/B) where dense BF16 compute and HBM bandwidth balance."""
        return self.bf16_flops / self.hbm_bytes_per_s

    def source(self, figure: str) -> str:
        return self.sources[figure]


@dataclass(frozen=True)
class Link:
    """A NIC or host link. Rates are per direction."""

    name: str
    kind: str  # "nic" or "host"
    gbit_per_s: float  # marketed line rate, 10^9 bit/s, one direction
    effective_gb_per_s: float | None  # an achievable rate where the catalog states one, else None
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def gb_per_s(self) -> float:
        """Line rate in GB/s (10^9 B/s) per direction: bits divided by 8."""
        return self.gbit_per_s / 8

    @property
    def bytes_per_s(self) -> float:
        return self.gb_per_s * 1e9

    def source(self, figure: str) -> str:
        return self.sources[figure]


@dataclass(frozen=True)
class Drive:
    """A data-centre SSD: the figures a KV tier on flash is sized and worn out by."""

    name: str
    capacity_tb: float  # decimal TB (10^12 B), as marketed
    dwpd: float  # rated drive writes per day over the warranty
    warranty_years: float
    seq_read_gb_per_s: float  # rated sequential read, 10^9 B/s
    seq_write_gb_per_s: float  # rated sequential write, 10^9 B/s
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def capacity_bytes(self) -> float:
        return self.capacity_tb * 1e12

    @property
    def tbw_bytes(self) -> float:
        """Rated endurance: capacity x DWPD x 365 x warranty years, in bytes."""
        return self.capacity_bytes * self.dwpd * 365 * self.warranty_years

    def source(self, figure: str) -> str:
        return self.sources[figure]


@dataclass(frozen=True)
class Domain:
    """A scale-up (NVLink) domain: the GPUs that talk over NVLink, and the NIC each one has for
    everything beyond it."""

    name: str
    gpu: str  # a gpus.toml name
    gpus: int  # GPUs in one NVLink domain
    nic: str  # a links.toml name: each GPU's scale-out NIC
    nics_per_gpu: int
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    # The lookups are imported when called: the loader imports these records to build them, so a
    # module-level import here would be circular.
    @property
    def gpu_record(self) -> GPU:
        from exercises.catalog.loader import gpu

        return gpu(self.gpu)

    @property
    def nic_record(self) -> Link:
        from exercises.catalog.loader import link

        return link(self.nic)

    @property
    def nvlink_bytes_per_s_one_way(self) -> float:
        """Per GPU, one direction: half the catalog's both-directions NVLink figure."""
        return self.gpu_record.nvlink_gbps / 2 * 1e9

    @property
    def nic_bytes_per_s(self) -> float:
        """Per GPU, one direction, all of its NICs together."""
        return self.nics_per_gpu * self.nic_record.bytes_per_s

    @property
    def hbm_bytes(self) -> float:
        """The domain's HBM under the marketed-GB convention."""
        return self.gpus * self.gpu_record.hbm_bytes

    def source(self, figure: str) -> str:
        return self.sources[figure]
