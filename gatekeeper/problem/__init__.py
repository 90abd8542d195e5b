"""Problems: loading (KernelBench and the seed's format), sidecar settings, and jitter.

- `sidecar.load_sidecar(path)`: the optional `<problem>.toml` beside a problem.
- `jitter.Jitter`: the harness object injected under `config.jitter.names`
  (`popcorn_pri.jitter_int(n, align=8)`), deterministic for a given seed.
- `implicit.jitter_constants(source, ...)`: rewrites the module int constants that size
  `get_inputs` / `get_init_inputs` (KernelBench style).
- `plan.plan_trials(...)`: the nominal and jittered trials of one run, from one seed.
- `shims.install_shims()`: modules the problem may import (`kernelbench.distributed_collectives`).
"""
