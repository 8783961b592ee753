-- piidx schema 12: what Pi 1.5 records about subagent runs and usage.
--
-- subagent_runs.status now takes the result's own `status` when it has one
-- (Pi 1.5's example extension: pending, running, completed, failed,
-- aborted); otherwise it is derived from the exit code, in the same words
-- (`completed` replaces `ok`; a run ended by a signal or with stop reason
-- `aborted` is `aborted`, not `failed`). Parser version 5 re-indexes.
ALTER TABLE subagent_runs ADD COLUMN termination_signal TEXT;

-- Parts of a usage record's counts, as Pi 1.5 reports them: never added to
-- the totals again (reasoning is part of output, cacheWrite1h of
-- cacheWrite); cost_from_provider is `cost.totalFromProvider` (1: the
-- provider billed cost_total, which then need not be the components' sum).
ALTER TABLE usage_records ADD COLUMN reasoning_tokens INTEGER;
ALTER TABLE usage_records ADD COLUMN cache_write_1h_tokens INTEGER;
ALTER TABLE usage_records ADD COLUMN cost_from_provider INTEGER;
