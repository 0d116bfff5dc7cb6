"""The real-size benchmark set: one table of programs, two sizings each.

Each program is a KernelBench-format problem whose sizes are placeholders; `make.py` writes one file
per program and sizing: `gpu/` (1-15 ms eager on an H100, as KernelBench v0.1 sizes its problems)
and `cpu/` (5-100 ms eager on a 2-core x86 machine; GEMM, MLP and transformer programs also at batch
1, 2 and 8), and the GPU sizing cast to 16-bit floats, `gpu-bf16/` and `gpu-fp16/` (the 16-bit
single programs of the GPU measurement issue). `size_check.py` measures eager time and reports
programs outside their band.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Program:
    name: str
    doc: str
    model: str  # the body of class Model (its __init__ and forward), with {placeholders}
    inputs: str  # the list get_inputs() returns
    sizes: dict[str, dict[str, int]]  # sizing -> placeholder values
    init: str = "[]"  # the list get_init_inputs() returns
    small_batch: bool = False  # the CPU sizing also gets batch 1, 2 and 8 variants (placeholder B)
    extra: dict[str, str] = field(default_factory=dict)  # module-level helpers


def _fwd(expr: str, args: str = "x") -> str:
    return f"    def forward(self, {args}):\n        return {expr}\n"


def _layer(init: str, expr: str, args: str = "x") -> str:
    return f"    def __init__(self):\n        super().__init__()\n{init}\n\n" + _fwd(expr, args)


P = Program
PROGRAMS: list[Program] = [
    # --- GEMMs
    P(
        "gemm_square",
        "Square fp32 GEMM.",
        _fwd("A @ B", "A, B"),
        "[torch.randn({N}, {N}), torch.randn({N}, {N})]",
        {"gpu": {"N": 4096}, "cpu": {"N": 1024}},
    ),
    P(
        "gemm_tall_skinny",
        "Tall-skinny fp32 GEMM (many rows, short K).",
        _fwd("A @ B", "A, B"),
        "[torch.randn({M}, {K}), torch.randn({K}, {N})]",
        {"gpu": {"M": 131072, "K": 256, "N": 1024}, "cpu": {"M": 49152, "K": 64, "N": 256}},
    ),
    P(
        "gemm_batched",
        "Batched fp32 GEMM (bmm).",
        _fwd("torch.bmm(A, B)", "A, B"),
        "[torch.randn({B}, {M}, {K}), torch.randn({B}, {K}, {N})]",
        {"gpu": {"B": 32, "M": 1024, "K": 1024, "N": 1024}, "cpu": {"B": 24, "M": 256, "K": 512, "N": 256}},
    ),
    P(
        "gemm_transposed_a",
        "fp32 GEMM with the first operand transposed.",
        _fwd("A.T @ B", "A, B"),
        "[torch.randn({K}, {M}), torch.randn({K}, {N})]",
        {"gpu": {"M": 4096, "K": 4096, "N": 4096}, "cpu": {"M": 1024, "K": 1024, "N": 1024}},
    ),
    P(
        "gemm_transposed_b",
        "fp32 GEMM with the second operand transposed.",
        _fwd("A @ B.T", "A, B"),
        "[torch.randn({M}, {K}), torch.randn({N}, {K})]",
        {"gpu": {"M": 4096, "K": 4096, "N": 4096}, "cpu": {"M": 1024, "K": 1024, "N": 1024}},
    ),
    P(
        "gemm_bf16",
        "Square bf16 GEMM.",
        _fwd("A @ B", "A, B"),
        "[torch.randn({N}, {N}, dtype=torch.bfloat16), torch.randn({N}, {N}, dtype=torch.bfloat16)]",
        {"gpu": {"N": 8192}, "cpu": {"N": 1664}},
    ),
    P(
        "gemm_bf16_batched",
        "Batched bf16 GEMM.",
        _fwd("torch.bmm(A, B)", "A, B"),
        "[torch.randn({B}, {N}, {N}, dtype=torch.bfloat16), torch.randn({B}, {N}, {N}, dtype=torch.bfloat16)]",
        {"gpu": {"B": 48, "N": 2048}, "cpu": {"B": 32, "N": 512}},
    ),
    P(
        "linear",
        "nn.Linear with bias (inference).",
        _layer("        self.fc = nn.Linear({K}, {N})", "self.fc(x)"),
        "[torch.randn({B}, {K})]",
        {"gpu": {"B": 8192, "K": 4096, "N": 4096}, "cpu": {"B": 256, "K": 2048, "N": 2048}},
        small_batch=True,
    ),
    # --- convolutions
    P(
        "conv1d",
        "1-D convolution.",
        _layer("        self.conv = nn.Conv1d({C}, {O}, 5, padding=2)", "self.conv(x)"),
        "[torch.randn({B}, {C}, {L})]",
        {"gpu": {"B": 64, "C": 128, "O": 256, "L": 8192}, "cpu": {"B": 24, "C": 64, "O": 128, "L": 2048}},
    ),
    P(
        "conv2d",
        "2-D convolution, 3x3.",
        _layer("        self.conv = nn.Conv2d({C}, {O}, 3, padding=1)", "self.conv(x)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 64, "C": 128, "O": 128, "H": 112}, "cpu": {"B": 16, "C": 64, "O": 64, "H": 56}},
    ),
    P(
        "conv3d",
        "3-D convolution, 3x3x3.",
        _layer("        self.conv = nn.Conv3d({C}, {O}, 3, padding=1)", "self.conv(x)"),
        "[torch.randn({B}, {C}, {D}, {H}, {H})]",
        {"gpu": {"B": 8, "C": 32, "O": 64, "D": 32, "H": 64}, "cpu": {"B": 1, "C": 16, "O": 32, "D": 16, "H": 32}},
    ),
    P(
        "conv2d_depthwise",
        "Depthwise 2-D convolution.",
        _layer("        self.conv = nn.Conv2d({C}, {C}, 3, padding=1, groups={C})", "self.conv(x)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 64, "C": 256, "H": 112}, "cpu": {"B": 32, "C": 128, "H": 56}},
    ),
    P(
        "conv_transpose2d",
        "Transposed 2-D convolution, stride 2.",
        _layer("        self.conv = nn.ConvTranspose2d({C}, {O}, 4, stride=2, padding=1)", "self.conv(x)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 96, "C": 128, "O": 64, "H": 64}, "cpu": {"B": 32, "C": 64, "O": 32, "H": 32}},
    ),
    # --- attention
    P(
        "attention",
        "Scaled dot-product attention.",
        _fwd("F.scaled_dot_product_attention(q, k, v)", "q, k, v"),
        "[torch.randn({B}, {Hd}, {S}, {D}) for _ in range(3)]",
        {"gpu": {"B": 16, "Hd": 16, "S": 1024, "D": 64}, "cpu": {"B": 8, "Hd": 8, "S": 256, "D": 64}},
    ),
    P(
        "attention_causal",
        "Causal scaled dot-product attention.",
        _fwd("F.scaled_dot_product_attention(q, k, v, is_causal=True)", "q, k, v"),
        "[torch.randn({B}, {Hd}, {S}, {D}) for _ in range(3)]",
        {"gpu": {"B": 16, "Hd": 16, "S": 1024, "D": 64}, "cpu": {"B": 8, "Hd": 8, "S": 256, "D": 64}},
    ),
    # --- softmax and norms on wide rows
    P(
        "softmax_wide",
        "Softmax over wide rows.",
        _fwd("torch.softmax(x, dim=-1)"),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 12288, "W": 32768}, "cpu": {"R": 2048, "W": 16384}},
    ),
    P(
        "log_softmax_wide",
        "Log-softmax over wide rows.",
        _fwd("torch.log_softmax(x, dim=-1)"),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 12288, "W": 32768}, "cpu": {"R": 2048, "W": 16384}},
    ),
    P(
        "layernorm",
        "LayerNorm over the last dimension.",
        _layer("        self.ln = nn.LayerNorm({W})", "self.ln(x)"),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 49152, "W": 8192}, "cpu": {"R": 8192, "W": 4096}},
    ),
    P(
        "rmsnorm",
        "RMSNorm written out (x * rsqrt(mean(x^2) + eps) * weight).",
        _layer(
            "        self.weight = nn.Parameter(torch.ones({W}))",
            "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight",
        ),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 16384, "W": 8192}, "cpu": {"R": 4096, "W": 4096}},
    ),
    P(
        "batchnorm2d",
        "BatchNorm2d (eval statistics).",
        _layer("        self.bn = nn.BatchNorm2d({C})", "self.bn(x)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 192, "C": 128, "H": 128}, "cpu": {"B": 160, "C": 64, "H": 64}},
    ),
    P(
        "groupnorm",
        "GroupNorm, 8 groups.",
        _layer("        self.gn = nn.GroupNorm(8, {C})", "self.gn(x)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 160, "C": 128, "H": 128}, "cpu": {"B": 192, "C": 64, "H": 64}},
    ),
    # --- reductions over each axis
    P(
        "sum_dim0",
        "Sum over the leading dimension.",
        _fwd("x.sum(0)"),
        "[torch.randn({A}, {Bd}, {C})]",
        {"gpu": {"A": 1024, "Bd": 1024, "C": 1024}, "cpu": {"A": 192, "Bd": 512, "C": 512}},
    ),
    P(
        "sum_dim1",
        "Sum over the middle dimension.",
        _fwd("x.sum(1)"),
        "[torch.randn({A}, {Bd}, {C})]",
        {"gpu": {"A": 1024, "Bd": 1024, "C": 1024}, "cpu": {"A": 256, "Bd": 512, "C": 512}},
    ),
    P(
        "sum_last",
        "Sum over the last dimension.",
        _fwd("x.sum(-1)"),
        "[torch.randn({A}, {Bd}, {C})]",
        {"gpu": {"A": 1024, "Bd": 1024, "C": 1024}, "cpu": {"A": 512, "Bd": 512, "C": 512}},
    ),
    P(
        "argmax_last",
        "Argmax over the last dimension.",
        _fwd("x.argmax(-1)"),
        "[torch.randn({A}, {C})]",
        {"gpu": {"A": 262144, "C": 4096}, "cpu": {"A": 16384, "C": 2048}},
    ),
    P(
        "var_mean",
        "Variance and mean over the last dimension.",
        _fwd("torch.var_mean(x, dim=-1)"),
        "[torch.randn({A}, {C})]",
        {"gpu": {"A": 262144, "C": 4096}, "cpu": {"A": 8192, "C": 2048}},
    ),
    P(
        "mse_loss",
        "Mean squared error of two tensors: a reduction to one value.",
        _fwd("F.mse_loss(a, b)", "a, b"),
        "[torch.randn({A}, {C}), torch.randn({A}, {C})]",
        {"gpu": {"A": 16384, "C": 32768}, "cpu": {"A": 4096, "C": 8192}},
    ),
    P(
        "layernorm_few_rows",
        "Layer norm over each sample's (C, H, W): few rows, each millions long.",
        _layer("        self.ln = nn.LayerNorm([{C}, {H}, {H}])", "self.ln(x)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 16, "C": 64, "H": 256}, "cpu": {"B": 1, "C": 64, "H": 512}},
    ),
    P(
        "softmax_heads_reshape",
        "Softmax over each head's slice of a row, scaled per column, returned in the input's shape.",
        _layer("        self.w = nn.Parameter(torch.rand({H} * {T}) + 0.5)",
               "(torch.softmax(x.reshape({B}, {H}, {T}), -1) * 2.0).reshape({B}, {H} * {T}) * self.w"),
        "[torch.randn({B}, {H} * {T})]",
        {"gpu": {"B": 2048, "H": 16, "T": 4096}, "cpu": {"B": 512, "H": 8, "T": 4096}},
    ),
    # --- pooling
    P(
        "maxpool2d",
        "Max pooling 3x3, stride 2.",
        _fwd("F.max_pool2d(x, 3, 2, 1)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 64, "C": 128, "H": 224}, "cpu": {"B": 8, "C": 64, "H": 112}},
    ),
    P(
        "avgpool2d",
        "Average pooling 2x2.",
        _fwd("F.avg_pool2d(x, 2)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 64, "C": 128, "H": 224}, "cpu": {"B": 16, "C": 64, "H": 112}},
    ),
    P(
        "adaptive_avgpool",
        "Global average pooling.",
        _fwd("F.adaptive_avg_pool2d(x, 1)"),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 192, "C": 512, "H": 112}, "cpu": {"B": 160, "C": 256, "H": 56}},
    ),
    # --- scans
    P(
        "cumsum_rows",
        "Cumulative sum along rows.",
        _fwd("torch.cumsum(x, dim=1)"),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 24576, "W": 16384}, "cpu": {"R": 3072, "W": 8192}},
    ),
    P(
        "cumsum_reverse",
        "Reverse cumulative sum along rows.",
        _fwd("torch.cumsum(x.flip(1), dim=1).flip(1)"),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 8192, "W": 16384}, "cpu": {"R": 1024, "W": 8192}},
    ),
    # --- level-2-style fused chains
    P(
        "gemm_gelu_scale_tanh",
        "Linear, GELU, scale, add a bias vector, tanh.",
        _layer(
            "        self.fc = nn.Linear({K}, {N})\n        self.bias = nn.Parameter(torch.randn({N}) * 0.1)",
            "torch.tanh(F.gelu(self.fc(x)) * 0.5 + self.bias)",
        ),
        "[torch.randn({B}, {K})]",
        {"gpu": {"B": 8192, "K": 4096, "N": 4096}, "cpu": {"B": 256, "K": 2048, "N": 2048}},
    ),
    P(
        "gemm_sigmoid_sum",
        "Linear, sigmoid, scale, sum over features.",
        _layer("        self.fc = nn.Linear({K}, {N})", "(torch.sigmoid(self.fc(x)) * 2.0).sum(-1, keepdim=True)"),
        "[torch.randn({B}, {K})]",
        {"gpu": {"B": 8192, "K": 4096, "N": 4096}, "cpu": {"B": 256, "K": 2048, "N": 2048}},
    ),
    P(
        "matmul_min_subtract",
        "Linear, min with a constant, subtract a constant, ReLU.",
        _layer("        self.fc = nn.Linear({K}, {N})", "torch.relu(torch.clamp_max(self.fc(x), 0.5) - 0.25)"),
        "[torch.randn({B}, {K})]",
        {"gpu": {"B": 8192, "K": 4096, "N": 4096}, "cpu": {"B": 256, "K": 2048, "N": 2048}},
    ),
    P(
        "conv_relu_bias",
        "Conv2d, ReLU, add a per-channel bias, scale.",
        _layer(
            "        self.conv = nn.Conv2d({C}, {O}, 3, padding=1)\n"
            "        self.bias = nn.Parameter(torch.randn({O}, 1, 1) * 0.1)",
            "(torch.relu(self.conv(x)) + self.bias) * 2.0",
        ),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 32, "C": 64, "O": 128, "H": 112}, "cpu": {"B": 24, "C": 32, "O": 64, "H": 56}},
    ),
    P(
        "conv_bn_relu",
        "Conv2d, BatchNorm (eval), ReLU.",
        _layer(
            "        self.conv = nn.Conv2d({C}, {O}, 3, padding=1, bias=False)\n        self.bn = nn.BatchNorm2d({O})",
            "torch.relu(self.bn(self.conv(x)))",
        ),
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 64, "C": 64, "O": 128, "H": 112}, "cpu": {"B": 24, "C": 32, "O": 64, "H": 56}},
    ),
    P(
        "gemm_layernorm_relu",
        "Linear, LayerNorm, ReLU.",
        _layer(
            "        self.fc = nn.Linear({K}, {N})\n        self.ln = nn.LayerNorm({N})",
            "torch.relu(self.ln(self.fc(x)))",
        ),
        "[torch.randn({B}, {K})]",
        {"gpu": {"B": 8192, "K": 4096, "N": 4096}, "cpu": {"B": 256, "K": 2048, "N": 2048}},
    ),
    # --- level-3-style blocks
    P(
        "mlp",
        "A 3-layer MLP.",
        _layer(
            "        self.net = nn.Sequential(nn.Linear({K}, {H}), nn.ReLU(), nn.Linear({H}, {H}), nn.ReLU(), "
            "nn.Linear({H}, {K}))",
            "self.net(x)",
        ),
        "[torch.randn({B}, {K})]",
        {"gpu": {"B": 4096, "K": 2048, "H": 4096}, "cpu": {"B": 128, "K": 1024, "H": 2048}},
        small_batch=True,
    ),
    P(
        "transformer_block",
        "A pre-norm transformer encoder block (attention, LayerNorm, MLP, residuals).",
        "    def __init__(self):\n        super().__init__()\n        self.h = {Hd}\n"
        "        self.ln1 = nn.LayerNorm({E})\n        self.qkv = nn.Linear({E}, 3 * {E})\n"
        "        self.proj = nn.Linear({E}, {E})\n        self.ln2 = nn.LayerNorm({E})\n"
        "        self.fc1 = nn.Linear({E}, 4 * {E})\n        self.fc2 = nn.Linear(4 * {E}, {E})\n\n"
        "    def forward(self, x):\n        b, s, e = x.shape\n"
        "        q, k, v = self.qkv(self.ln1(x)).split(e, dim=-1)\n"
        "        q, k, v = (t.reshape(b, s, self.h, e // self.h).transpose(1, 2) for t in (q, k, v))\n"
        "        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, e)\n"
        "        x = x + self.proj(a)\n        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))\n",
        "[torch.randn({B}, {S}, {E})]",
        {"gpu": {"B": 16, "S": 512, "E": 1024, "Hd": 16}, "cpu": {"B": 2, "S": 128, "E": 512, "Hd": 8}},
        small_batch=True,
    ),
    P(
        "resnet_basic_block",
        "A ResNet basic block (conv-bn-relu, conv-bn, identity, relu).",
        "    def __init__(self):\n        super().__init__()\n"
        "        self.c1 = nn.Conv2d({C}, {C}, 3, padding=1, bias=False)\n        self.b1 = nn.BatchNorm2d({C})\n"
        "        self.c2 = nn.Conv2d({C}, {C}, 3, padding=1, bias=False)\n        self.b2 = nn.BatchNorm2d({C})\n\n"
        "    def forward(self, x):\n        y = torch.relu(self.b1(self.c1(x)))\n"
        "        return torch.relu(self.b2(self.c2(y)) + x)\n",
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 64, "C": 128, "H": 56}, "cpu": {"B": 32, "C": 64, "H": 28}},
    ),
    P(
        "lstm_cell_8_steps",
        "An LSTM cell unrolled over 8 steps (one GEMM per step plus gates).",
        "    def __init__(self):\n        super().__init__()\n        self.cell = nn.LSTMCell({I}, {H})\n\n"
        "    def forward(self, xs, h, c):\n        for t in range(8):\n"
        "            h, c = self.cell(xs[t], (h, c))\n        return h, c\n",
        "[torch.randn(8, {B}, {I}), torch.randn({B}, {H}), torch.randn({B}, {H})]",
        {"gpu": {"B": 2048, "I": 1024, "H": 1024}, "cpu": {"B": 64, "I": 512, "H": 512}},
    ),
    P(
        "depthwise_separable_block",
        "Depthwise 3x3 conv, BatchNorm, ReLU, pointwise 1x1 conv, BatchNorm, ReLU.",
        "    def __init__(self):\n        super().__init__()\n"
        "        self.dw = nn.Conv2d({C}, {C}, 3, padding=1, groups={C}, bias=False)\n"
        "        self.b1 = nn.BatchNorm2d({C})\n"
        "        self.pw = nn.Conv2d({C}, {O}, 1, bias=False)\n        self.b2 = nn.BatchNorm2d({O})\n\n"
        "    def forward(self, x):\n        return torch.relu(self.b2(self.pw(torch.relu(self.b1(self.dw(x))))))\n",
        "[torch.randn({B}, {C}, {H}, {H})]",
        {"gpu": {"B": 32, "C": 128, "O": 256, "H": 112}, "cpu": {"B": 14, "C": 64, "O": 128, "H": 56}},
    ),
    P(
        "activations",
        "A chain of transcendental activations (GELU, SiLU, sigmoid, tanh).",
        _fwd("torch.tanh(torch.sigmoid(F.silu(F.gelu(x))) * 3.0)"),
        "[torch.randn({R}, {W})]",
        {"gpu": {"R": 16384, "W": 16384}, "cpu": {"R": 2048, "W": 4096}},
    ),
]

SMALL_BATCHES = (1, 2, 8)
