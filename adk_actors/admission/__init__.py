"""Admission control: global and per-agent limits for runs (reject or a bounded FIFO queue)."""
