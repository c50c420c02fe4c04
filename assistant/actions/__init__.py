"""Actions on a job: stop it safely (the report written first), watch it and respond to a stall
(report, stop, or restart from its checkpoint), and the journal of what happened. Each calls the
diagnosis pipeline for its reports; what a resume needs comes from debug_stuck.recovery."""
