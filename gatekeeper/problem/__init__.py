"""Problems: loading (KernelBench, the seed's format, KernelBench-Hard), sidecar settings, and jitter.

- `loaded.load_problem(path)`: the one `Problem` a check loads and hands to every stage
  (format, files, source, sidecar merged with problem.yaml, canonical shapes, static facts).
- `formats`: where a format's files are, the `problem.yaml` reader, the
  tolerance defaults by format.
- `shapes_file`, `shapes_eval` (+ `shapes_expr`): the declared shapes (shapes.py, the sidecar), read without running them;
  `dimensions`: fixed and free dimensions; `shapes_worker`: shapes.py run in the sandbox, for the
  stages that run code.
- `sidecar.load_sidecar(path)`: the optional `<problem>.toml` beside a problem.
- `jitter.Jitter`: the harness object injected under `config.jitter.names`
  (`popcorn_pri.jitter_int(n, align=8)`), deterministic for a given seed.
- `implicit.jitter_constants(source, ...)`: rewrites the module int constants that size
  `get_inputs` / `get_init_inputs` (KernelBench style).
- `plan.plan_trials(...)`: the nominal and jittered trials of one run, from one seed.
- `shims.install_shims()`: modules the problem may import (`kernelbench.distributed_collectives`).
"""
