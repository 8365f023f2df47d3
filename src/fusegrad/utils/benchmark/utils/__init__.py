"""The pieces of `fusegrad.utils.benchmark`: `common` (TaskSpec, Measurement), `timer`
(Timer) and `compare` (Compare)."""
