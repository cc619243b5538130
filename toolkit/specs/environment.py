"""`kind: Environment`: what goes into a serving image, and the named server presets it runs."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from toolkit import engines
from toolkit.errors import SpecValueError, did_you_mean
from toolkit.engines import sglang as sglang_engine
from toolkit.specs.base import ArgValue, Hash, Name, Positive, ServerArgs, Sha256, StrictModel

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
IMAGE_RE = re.compile(r"^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?$")
Version = Annotated[str, Field(pattern=r"^[0-9][0-9A-Za-z.+!-]*$", description="an exact version, e.g. 0.5.23")]


class Package(StrictModel):
    """One pinned Python package installed in the image with pip."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,.-]+\])?$",
                               description="a package name, extras in brackets, no version, e.g. sglang[all]")]
    version: Version
    index_url: str | None = Field(None, description="pip --index-url for this package, e.g. the torch cu130 index")
    extra_index_url: str | None = None
    no_deps: bool = Field(False, description="install with --no-deps")


class Patch(StrictModel):
    """A unified diff applied to the installed SGLang package, checked before any build."""

    path: str = Field(description="path of the .patch file, relative to the spec file")
    sha256: Sha256
    fuzz: int = Field(0, ge=0, le=3, description="context lines a hunk may mismatch (GNU patch --fuzz). 0, the "
                                                 "default, applies a hunk only where its context matches exactly; "
                                                 "allow more only after checking where the hunk lands. Recorded in "
                                                 "the build record and the image labels")


class SGLang(StrictModel):
    version: Version
    source: Literal["wheel", "git"] = "wheel"
    git_url: str = "https://github.com/sgl-project/sglang.git"
    git_ref: str | None = Field(None, description="tag or commit for source: git (default v<version>)")
    extras: list[str] = Field(default_factory=list, description="pip extras, e.g. [all]")
    deps: bool = Field(True, description="install SGLang's own dependencies (false: --no-deps, e.g. CPU test images)")
    patches: list[Patch] = Field(default_factory=list)


class CABundle(StrictModel):
    """A CA certificate bundle that TLS inside the build trusts (corporate proxies, mirrors)."""

    path: str = Field(description="PEM file, relative to the spec file or absolute")
    keep: bool = Field(False, description="leave the bundle and its settings in the final image")


# The versions of the recipes toolkit/serve/dummy.py makes dummy models with: bump one when its code changes
# what it writes (a new hash, a new folder). The spec hash covers them (`hash_extra`).
DUMMY_RECIPE = "toolkit-dummy-v1"  # model.dummy: random weights for the embedded engine
CONFIG_RECIPE = "toolkit-dummy-config-v1"  # dummy_models: config-only folders for SGLang's --load-format dummy


class DummyModel(StrictModel):
    """A tiny model with random weights made locally (like SGLang's --load-format dummy)."""

    architecture: Literal["llama"] = "llama"
    hidden_size: int = Field(64, ge=8)
    intermediate_size: int = Field(128, ge=8)
    layers: int = Field(2, ge=1)
    heads: int = Field(4, ge=1)
    vocab_size: int = Field(2048, ge=256)
    max_position_embeddings: int = Field(4096, ge=128)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    seed: int = 0

    @model_validator(mode="after")
    def _shapes(self) -> "DummyModel":
        # what transformers' LlamaConfig refuses when the run makes the model (every head attends to
        # hidden_size / heads dimensions; RoPE rotates them in pairs); one head per KV head, so no
        # separate KV-heads rule applies
        if self.hidden_size % self.heads:
            raise SpecValueError(f"heads ({self.heads}) must divide hidden_size ({self.hidden_size}): each head gets "
                                 "hidden_size / heads dimensions", key="heads",
                                 hint=_heads_hint(self.hidden_size, lambda h: True))
        if (self.hidden_size // self.heads) % 2:
            raise SpecValueError(f"hidden_size / heads = {self.hidden_size // self.heads} must be even: rotary "
                                 "position embeddings rotate each head's dimensions in pairs", key="heads",
                                 hint=_heads_hint(self.hidden_size, lambda h: (self.hidden_size // h) % 2 == 0))
        return self

    # json-edge: added to the hashed document
    def hash_extra(self) -> dict:
        # every spec hashed before recipes were versioned was made with v1: the field appears from v2 on
        return {} if DUMMY_RECIPE == "toolkit-dummy-v1" else {"recipe": DUMMY_RECIPE}


def _heads_hint(hidden_size: int, ok) -> str:
    """The head counts that divide hidden_size (and pass `ok`), for a refused `heads:`."""
    good = [h for h in range(1, min(hidden_size, 128) + 1) if hidden_size % h == 0 and ok(h)]
    return (f"choose heads among {', '.join(map(str, good[:12]))}" + (" ..." if len(good) > 12 else "")
            + f" for hidden_size {hidden_size}" if good else "choose hidden_size a multiple of 2 x heads")


class DummyConfig(StrictModel):
    """A config-only model folder for SGLang's `--load-format dummy` (SGLang fills random weights): config.json
    and the toolkit's byte-level BPE tokenizer, written by toolkit/serve/dummy.py. The config's vocabulary is
    the tokenizer's (at most vocab_size), so every id the random model emits decodes."""

    architecture: Literal["llama", "llama-eagle3"] = Field(
        "llama", description="llama: a LlamaForCausalLM; llama-eagle3: an EAGLE-3 drafter (LlamaForCausalLMEagle3) "
                             "for the folder `eagle3_draft_of` names")
    eagle3_draft_of: str | None = Field(None, description="llama-eagle3: the dummy_models folder of its target")
    hidden_size: int = Field(2048, ge=8)
    intermediate_size: int = Field(8192, ge=8)
    layers: int = Field(16, ge=1)
    heads: int = Field(32, ge=1)
    kv_heads: int = Field(8, ge=1)
    vocab_size: int = Field(32000, ge=256, description="the tokenizer's target size")
    max_position_embeddings: int = Field(16384, ge=128, description="the context length SGLang serves")
    rope_theta: Positive = 500000.0
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"

    @model_validator(mode="after")
    def _shapes(self) -> "DummyConfig":
        # what SGLang's model code assumes of a Llama: each attention head gets hidden_size / heads dimensions,
        # and the KV heads are shared by equal groups of query heads
        if self.hidden_size % self.heads:
            raise SpecValueError(f"heads ({self.heads}) must divide hidden_size ({self.hidden_size}): each head gets "
                                 "hidden_size / heads dimensions", key="heads",
                                 hint=_heads_hint(self.hidden_size, lambda h: True))
        if self.heads % self.kv_heads:
            raise SpecValueError(f"kv_heads ({self.kv_heads}) must divide heads ({self.heads}): each KV head serves "
                                 "an equal group of query heads", key="kv_heads",
                                 hint=f"choose kv_heads among the divisors of heads ({self.heads}): "
                                      + ", ".join(str(k) for k in range(1, self.heads + 1) if self.heads % k == 0))
        return self

    def hash_extra(self) -> dict:  # json-edge: added to the hashed document
        return {"recipe": CONFIG_RECIPE}


class Model(StrictModel):
    path: str | None = Field(None, description="a model directory already on disk (relative to the spec file), or "
                                               "`toolkit:NAME`, one the toolkit ships in toolkit/_data/NAME "
                                               "(toolkit:quickstart-model: the quickstart's trained target)")
    dummy: DummyModel | None = None

    @model_validator(mode="after")
    def _one(self) -> "Model":
        if (self.path is None) == (self.dummy is None):
            raise SpecValueError("give exactly one of `path` or `dummy`", key="dummy",
                                 hint="`path:` serves a model folder on disk (or toolkit:NAME); `dummy:` makes a small "
                                      "random Llama from its shapes" + (": remove one" if self.path else ""))
        return self


Preset = ServerArgs


class Environment(StrictModel):
    kind: Literal["Environment"]
    name: Name
    description: str = ""
    engine: str = Field(
        "sglang", description="sglang: a built image; transformers: the embedded CPU engine (`transformers serve`); "
                              "vllm: `vllm serve` where vLLM is installed (its version pinned under `packages:`)",
        json_schema_extra={"enum": list(engines.BUILTIN)})  # any registered engine (toolkit/engines/__init__.py)
    base_image: str | None = Field(None, description="an image reference, e.g. nvidia/cuda:13.0.1-devel-ubuntu24.04, optionally "
                                      "pinned: @sha256:<64 lower-case hex digits>")
    cuda: Annotated[str, Field(pattern=r"^[0-9]+\.[0-9]+$", description="MAJOR.MINOR, e.g. 13.0")] | None = Field(None, description="CUDA version, e.g. 13.0")
    python: Annotated[str, Field(pattern=r"^3\.[0-9]+$", description="3.MINOR, e.g. 3.12")] = "3.12"
    apt_packages: list[str] = Field(default_factory=list, description="extra Debian/Ubuntu packages")
    packages: list[Package] = Field(default_factory=list, description="pinned Python packages, installed in order")
    sglang: SGLang | None = None
    flashinfer: Version | None = Field(None, description="flashinfer-python version")
    build_args: dict[str, str] = Field(default_factory=dict, description="Docker build args, e.g. TORCH_CUDA_ARCH_LIST")
    env: dict[str, str] = Field(default_factory=dict, description="runtime environment variables of the image, e.g. NCCL_DEBUG: WARN")
    ca_bundle: CABundle | None = None
    model: Model | None = Field(None, description="transformers engine run locally: the model it serves (an "
                                                  "external target serves its own: no `model:` needed)")
    dummy_models: Annotated[dict[str, DummyConfig] | None,
                            Hash.omit_default("unset: a v1 environment's hash holds")] = Field(
        None, description="config-only model folders the presets serve with `load-format: dummy`, by absolute path: "
                          "made from this recipe before a server starts (process launcher) or by "
                          "benchmarks/sglang_h200/make_models.py, so the spec (and its hash) says what is served")
    weights: Annotated[dict[str, Sha256] | None, Hash.omit_default("unset: an earlier environment's hash holds")] = Field(
        None, description="model folders (or files) by path, absolute, relative to the spec file or `toolkit:NAME`, "
                          "with their sha256 (toolkit/serve/weights.py: a folder's digest is that of its sorted file listing); "
                          "a local launcher checks the ones its preset reads before the server starts, and the "
                          "archive records them. `python -m toolkit.pair pin FOLDER` prints the lines")
    servers: dict[Name, Preset] = Field(default_factory=dict, description="named server presets (flag: value)")
    request_params: dict[Name, dict[str, ArgValue | dict[str, Any]]] = Field(
        default_factory=dict, description="per-preset request parameters, e.g. generation_config for transformers")

    @field_validator("engine")
    @classmethod
    def _registered(cls, v: str) -> str:
        """A registered engine's name; another is refused as a Literal would be (the values, a did-you-mean)."""
        if engines.lookup(v) is None:
            names = [repr(n) for n in engines.names()]
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1
                                                               else names)})
        return v

    @field_validator("base_image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is None:
            return v
        ref, _, digest = v.partition("@")
        if digest and not DIGEST_RE.match(digest):
            raise ValueError(f"malformed digest {digest!r}: expected sha256: followed by 64 lower-case hex digits")
        if not IMAGE_RE.match(ref):
            raise ValueError(f"{ref!r} is not an image reference (e.g. nvidia/cuda:13.0.1-devel-ubuntu24.04)")
        return v

    @field_validator("build_args", "env", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        if isinstance(v, dict):
            out = {}
            for k, val in v.items():
                if isinstance(val, bool):
                    out[k] = "1" if val else "0"
                elif isinstance(val, (int, float)):
                    out[k] = str(val)
                else:
                    out[k] = val
            return out
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Environment":
        if engines.get(self.engine).requires_image:
            if self.base_image is None:
                raise SpecValueError("an sglang environment needs `base_image`", key=["engine", "kind"],
                                     hint="add `base_image:` (e.g. nvidia/cuda:13.0.1-devel-ubuntu24.04), or set "
                                          "`engine: transformers` for the embedded CPU engine")
            if self.sglang is None:
                raise SpecValueError("an sglang environment needs an `sglang:` section (version, source, patches)",
                                     key=["engine", "base_image", "kind"],
                                     hint="add `sglang: {version: 0.5.23}` (README.md, Spec reference), or set `engine: transformers`")
        for name in self.request_params:
            if name not in self.servers:
                raise SpecValueError(f"request_params names preset {name!r}, which is not under `servers:`",
                                     key=("request_params", name),
                                     hint=did_you_mean(name, list(self.servers)) or
                                     f"add `{name}:` under `servers:`, or use one of its presets: "
                                     + (", ".join(self.servers) or "none yet"))
        for path, d in (self.dummy_models or {}).items():
            here = ("dummy_models", path)
            if not path.startswith("/"):
                raise SpecValueError(f"dummy_models: {path!r} is not an absolute path (the folder SGLang reads)",
                                     key=here, hint=f"write the folder as SGLang sees it, from /: e.g. /models/{path.strip('./')}")
            if (d.architecture == "llama-eagle3") != (d.eagle3_draft_of is not None):
                raise SpecValueError(f"`eagle3_draft_of` goes with architecture llama-eagle3, "
                                     "and only with it", key=[here + ("eagle3_draft_of",), here + ("architecture",)],
                                     hint="a drafter: `architecture: llama-eagle3` and `eagle3_draft_of: TARGET` "
                                          "(a llama folder of dummy_models); a target: neither")
            target = (self.dummy_models or {}).get(d.eagle3_draft_of) if d.eagle3_draft_of else None
            if d.eagle3_draft_of and (target is None or target.architecture != "llama"):
                llamas = [p for p, x in (self.dummy_models or {}).items() if x.architecture == "llama"]
                raise SpecValueError(f"eagle3_draft_of {d.eagle3_draft_of!r} is not a llama "
                                     "folder of dummy_models", key=here + ("eagle3_draft_of",),
                                     hint=(did_you_mean(d.eagle3_draft_of, llamas) or "name one of them: "
                                           + ", ".join(llamas)) if llamas else
                                     "add its target under dummy_models (architecture: llama) and name it here")
            if target is not None and target.vocab_size != d.vocab_size:
                raise SpecValueError(f"vocab_size {d.vocab_size} differs from its target's "
                                     f"{target.vocab_size} (a dummy drafter has no token map)",
                                     key=[here + ("vocab_size",), here + ("eagle3_draft_of",)],
                                     hint=f"set `vocab_size: {target.vocab_size}`, the target's")
        return self

    def spec_errors(self) -> list[tuple[tuple, str, str]]:
        """Mistakes found after validation, each at its own line (load_spec raises the first): a
        generation_config key the embedded engine's transformers does not have would be silently ignored."""
        from toolkit.specs.genconfig import bad_value, refused, unknown_key
        from toolkit.specs.sampling import bad_sampling

        eng = engines.get(self.engine)
        out = list(eng.spec_errors(self))
        for arm, params in self.request_params.items():  # sampling values of the request body, in range: at its
            for key, value in params.items():           # top level or in a section of it (SGLang's sampling_params)
                inner = value.items() if isinstance(value, dict) and key != "generation_config" else ()
                for where, k, v in [((key,), key, value), *(((key, k), k, v) for k, v in inner)]:
                    bad = bad_sampling(str(k), v, eng.top_k_off)
                    if bad:
                        out.append((("request_params", arm, *where), *bad))
        if not eng.reads_generation_config:
            return out
        for arm, params in self.request_params.items():
            gen = params.get("generation_config")
            for key in gen if isinstance(gen, dict) else []:
                bad = unknown_key(str(key)) or bad_value(str(key), gen[key]) or bad_sampling(str(key), gen[key])
                if bad:
                    out.append((("request_params", arm, "generation_config", key), *bad))
            whole = refused(gen) if isinstance(gen, dict) and not out else None
            if whole:
                out.append((("request_params", arm, "generation_config", whole[0]), *whole[1:]))
        return out

    @property
    def pinned(self) -> bool:
        return self.base_image is not None and "@sha256:" in self.base_image

    def spec_warnings(self) -> list[str]:
        out = list(engines.get(self.engine).spec_warnings(self))
        if engines.get(self.engine).reads_generation_config and any(isinstance(p.get("generation_config"), dict)
                                                 for p in self.request_params.values()):
            from toolkit.specs.genconfig import generation_config_keys

            if generation_config_keys() is None:
                out.append("generation_config keys were not checked: transformers is not installed here "
                           '(pip install "toolkit[local]")')
        if engines.get(self.engine).builds_image and self.base_image is not None and not self.pinned:
            out.append(f"base image {self.base_image} is not pinned by digest: builds may change underneath you "
                       "(append @sha256:... to pin it)")
        known = set(self.dummy_models or {})
        for name, args in self.servers.items():
            if not sglang_engine.meaning(args).dummy_weights:
                continue
            for flag, folder in sglang_engine.model_folders(args):
                if folder not in known:
                    out.append(f"preset {name} serves random weights from {flag} {folder}, a folder whose "
                               "config the spec does not hold: its hash does not change when that folder does; "
                               "declare its recipe under `dummy_models:`")
        return out
