-- samples: one row per perf sample ingested beside the trace (`ingest --perf`, the text of
-- `perf script`); empty when the trace has none. Times are on the trace's clock.
CREATE VIEW samples AS
SELECT
    -- sample: sample id, 0-based in the perf file's order
    sample,
    -- ts: when the sample was taken, ns on the trace's monotonic clock (perf time + --perf-offset)
    ts,
    -- thread: OS thread id the sample interrupted (perf's tid), as in events.thread
    thread,
    -- pid: process id, null when perf script printed only the tid
    pid,
    -- comm: the thread's command name, null when not printed
    comm,
    -- cpu: CPU the sample was taken on, null when not recorded (perf record -a or --sample-cpu)
    cpu,
    -- event: perf event that took the sample (cpu-clock, cycles, instructions:u), null when not printed
    event,
    -- period: events the sample stands for, in the event's unit (cpu-clock: ns; cycles: cycles); null when not printed
    period,
    -- leaf: innermost function executing; [dso] when the symbol is unknown, [unknown] when nothing is
    leaf,
    -- leaf_dso: binary or library of the innermost function ([kernel.kallsyms] for the kernel), null when not printed
    leaf_dso,
    -- stack: functions on the call stack, innermost first (one entry without perf record -g)
    stack,
    -- folded: the stack outermost first, joined by ';' (flame graph's folded format)
    folded,
    -- line: 1-based line of the sample's header in the perf script file
    line
FROM {{samples}};
