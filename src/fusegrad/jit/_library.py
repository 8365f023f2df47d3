"""Scriptable `forward`s for fusegrad layers whose own `forward` uses Python the script
compiler does not take (checks, fused paths, `isinstance`), computing the same thing as
TorchScript's versions of them: the recurrent layers and cells, MultiheadAttention, the
Transformer encoder layer and the transposed convolutions.

Each `forward` is generated for the instance (a recurrent layer's layer count, directions,
bias and weight names, attention's sizes, the encoder layer's activation are constants of
the source, as TorchScript's are of its type) and calls ATen's operations
(`fusegrad.lstm`, `lstm_cell`, `F.multi_head_attention_forward`, ...). The source is put in
`linecache` under a name of its own, so the compiler reads it and its errors point into it
like any other source. A configuration a template does not cover (an LSTM's projections)
gets None: the layer's own `forward` is compiled, and refused where it cannot be.
"""

from __future__ import annotations

import linecache

_OPS = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}

_LSTM = '''\
def forward(self, input, hx: tuple[Tensor, Tensor] | None = None
            ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    is_batched = input.dim() == 3
    if not is_batched:
        input = input.unsqueeze({batch_dim})
    max_batch = input.size({batch_dim})
    if hx is None:
        h0 = fusegrad.zeros({states}, max_batch, {hidden}, dtype=input.dtype)
        c0 = fusegrad.zeros({states}, max_batch, {hidden}, dtype=input.dtype)
    else:
        h0, c0 = hx
        if not is_batched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1)
    out, h, c = fusegrad.lstm(input, [h0, c0], [{weights}], {bias}, {layers}, {dropout},
                              self.training, {bidirectional}, {batch_first})
    if not is_batched:
        out = out.squeeze({batch_dim})
        h = h.squeeze(1)
        c = c.squeeze(1)
    return out, (h, c)
'''

_OTHER = '''\
def forward(self, input, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
    is_batched = input.dim() == 3
    if not is_batched:
        input = input.unsqueeze({batch_dim})
    max_batch = input.size({batch_dim})
    if hx is None:
        h0 = fusegrad.zeros({states}, max_batch, {hidden}, dtype=input.dtype)
    else:
        h0 = hx
        if not is_batched:
            h0 = h0.unsqueeze(1)
    out, h = fusegrad.{op}(input, h0, [{weights}], {bias}, {layers}, {dropout},
                           self.training, {bidirectional}, {batch_first})
    if not is_batched:
        out = out.squeeze({batch_dim})
        h = h.squeeze(1)
    return out, h
'''

_made: dict = {}


def recurrent_forward(module):
    """The generated `forward` of a recurrent layer (RNN, LSTM, GRU) given as its script
    module, or None for what it does not cover (projections)."""
    consts = module._jit_consts
    mode = consts.get("mode")
    if mode not in _OPS or consts.get("proj_size", 0):
        return None
    names = consts.get("_flat_weights_names")
    if not isinstance(names, (list, tuple)):
        return None
    fields = {"batch_dim": 0 if consts["batch_first"] else 1,
              "states": consts["num_layers"] * (2 if consts["bidirectional"] else 1),
              "hidden": consts["hidden_size"], "op": _OPS[mode],
              "weights": ", ".join(f"self.{n}" for n in names),
              "bias": bool(consts["bias"]), "layers": consts["num_layers"],
              "dropout": float(consts["dropout"]),
              "bidirectional": bool(consts["bidirectional"]),
              "batch_first": bool(consts["batch_first"])}
    text = (_LSTM if mode == "LSTM" else _OTHER).format(**fields)
    return _generated(text, mode.lower())


_MHA = '''\
def forward(self, query, key, value, key_padding_mask: Tensor | None = None,
            need_weights: bool = True, attn_mask: Tensor | None = None,
            average_attn_weights: bool = True, is_causal: bool = False
            ) -> tuple[Tensor, Tensor | None]:
    is_batched = query.dim() == 3
    if {batch_first} and is_batched:
        query = query.transpose(1, 0)
        key = key.transpose(1, 0)
        value = value.transpose(1, 0)
    out, weights = F.multi_head_attention_forward(
        query, key, value, {embed_dim}, {num_heads}, self.in_proj_weight,
        self.in_proj_bias, self.bias_k, self.bias_v, {add_zero_attn}, {dropout},
        self.out_proj.weight, self.out_proj.bias, training=self.training,
        key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
        use_separate_proj_weight={separate}, q_proj_weight=self.q_proj_weight,
        k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
        average_attn_weights=average_attn_weights, is_causal=is_causal)
    if {batch_first} and is_batched:
        out = out.transpose(1, 0)
    return out, weights
'''

_ENCODER = '''\
def forward(self, src, src_mask: Tensor | None = None,
            src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
    x = src
    if {norm_first}:
        y = self.norm1(x)
        y = self.self_attn(y, y, y, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        x = x + self.dropout1(y)
        y = self.linear2(self.dropout({activation}(self.linear1(self.norm2(x)))))
        x = x + self.dropout2(y)
    else:
        y = self.self_attn(x, x, x, attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        x = self.norm1(x + self.dropout1(y))
        y = self.linear2(self.dropout({activation}(self.linear1(x))))
        x = self.norm2(x + self.dropout2(y))
    return x
'''


def _generated(text: str, kind: str):
    """The function `forward` of the source `text`, compiled once and kept in linecache."""
    import fusegrad
    import fusegrad.nn.functional as F

    fn = _made.get(text)
    if fn is None:
        filename = f"<fusegrad.jit {kind} forward {len(_made)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True),
                                     filename)
        scope = {"fusegrad": fusegrad, "F": F, "Tensor": fusegrad.Tensor,
                 "__name__": "fusegrad.jit._library"}
        exec(compile(text, filename, "exec"), scope)  # noqa: S102  (our own template)
        fn = _made[text] = scope["forward"]
    return fn


def attention_forward(module):
    """The generated `forward` of a MultiheadAttention, over
    `F.multi_head_attention_forward` as PyTorch's is."""
    c = module._jit_consts
    needed = ("batch_first", "embed_dim", "num_heads", "add_zero_attn", "dropout",
              "_qkv_same_embed_dim")
    if any(n not in c for n in needed):
        return None
    return _generated(_MHA.format(
        batch_first=bool(c["batch_first"]), embed_dim=int(c["embed_dim"]),
        num_heads=int(c["num_heads"]), add_zero_attn=bool(c["add_zero_attn"]),
        dropout=float(c["dropout"]), separate=not c["_qkv_same_embed_dim"]), "attention")


def encoder_layer_forward(module, activation):
    """The generated `forward` of a TransformerEncoderLayer; `activation` is the layer's
    (a submodule, or a function of `nn.functional`)."""
    import fusegrad.nn.functional as F

    if "activation" in module._modules:
        call = "self.activation"
    elif callable(activation) and getattr(F, getattr(activation, "__name__", ""), None) \
            is activation:
        call = f"F.{activation.__name__}"
    else:
        return None
    return _generated(_ENCODER.format(norm_first=bool(module._jit_consts.get("norm_first")),
                                      activation=call), "encoder layer")


_LSTM_CELL = '''\
def forward(self, input, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    is_batched = input.dim() == 2
    if not is_batched:
        input = input.unsqueeze(0)
    if hx is None:
        h0 = fusegrad.zeros(input.size(0), {hidden}, dtype=input.dtype)
        c0 = fusegrad.zeros(input.size(0), {hidden}, dtype=input.dtype)
    else:
        h0, c0 = hx
        if not is_batched:
            h0 = h0.unsqueeze(0)
            c0 = c0.unsqueeze(0)
    h, c = fusegrad.lstm_cell(input, [h0, c0], self.weight_ih, self.weight_hh, self.bias_ih,
                              self.bias_hh)
    if not is_batched:
        h = h.squeeze(0)
        c = c.squeeze(0)
    return h, c
'''

_CELL = '''\
def forward(self, input, hx: Tensor | None = None) -> Tensor:
    is_batched = input.dim() == 2
    if not is_batched:
        input = input.unsqueeze(0)
    if hx is None:
        h0 = fusegrad.zeros(input.size(0), {hidden}, dtype=input.dtype)
    else:
        h0 = hx
        if not is_batched:
            h0 = h0.unsqueeze(0)
    h = fusegrad.{op}(input, h0, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
    if not is_batched:
        h = h.squeeze(0)
    return h
'''


def cell_forward(module, kind: str):
    """The generated `forward` of a recurrent cell (`kind`: LSTMCell, GRUCell, RNNCell),
    over ATen's cell operations as TorchScript's is."""
    c = module._jit_consts
    hidden = c.get("hidden_size")
    if not isinstance(hidden, int):
        return None
    if kind == "LSTMCell":
        return _generated(_LSTM_CELL.format(hidden=hidden), "lstm cell")
    op = "gru_cell" if kind == "GRUCell" else {"tanh": "rnn_tanh_cell", "relu": "rnn_relu_cell"
                                                }.get(c.get("nonlinearity", "tanh"))
    if op is None:
        return None
    return _generated(_CELL.format(hidden=hidden, op=op), kind.lower())


_CONV_TRANSPOSE = '''\
def forward(self, input, output_size: list[int] | None = None) -> Tensor:
    if output_size is None:
        output_padding = [{given}]
    else:
        sizes = output_size[len(output_size) - {n}:]
        output_padding: list[int] = []
        for i in range({n}):
            low = (input.size(input.dim() - {n} + i) - 1) * self.stride[i] \\
                - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + 1
            output_padding.append(sizes[i] - low)
    return F.conv_transpose{n}d(input, self.weight, self.bias, self.stride, self.padding,
                               output_padding, self.groups, self.dilation)
'''


def conv_transpose_forward(module, n: int):
    """The generated `forward` of a ConvTranspose{n}d: the output padding from
    `output_size` when given, as TorchScript's computes it."""
    given = module._jit_consts.get("output_padding")
    if not isinstance(given, (tuple, list)) or len(given) != n or \
            module._jit_consts.get("padding_mode", "zeros") != "zeros":
        return None
    return _generated(_CONV_TRANSPOSE.format(
        n=n, given=", ".join(f"self.output_padding[{i}]" for i in range(n))),
        f"conv transpose {n}d")


_ENCODER_STACK = '''\
def forward(self, src, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
            is_causal: bool | None = None) -> Tensor:
    output = src
    for layer in self.layers:
        output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
    if self.norm is not None:
        output = self.norm(output)
    return output
'''


def encoder_forward(module):
    """The generated `forward` of a TransformerEncoder: its layers in turn, then its norm
    (`is_causal` is a hint the layers' results do not depend on)."""
    if "layers" not in module._modules:
        return None
    return _generated(_ENCODER_STACK, "encoder")
