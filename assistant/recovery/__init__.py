"""Recovery knowledge: how a job was launched (launchers, frameworks), where its checkpoints are and
which one is whole, the command that resumes it, and which processes make up its tree."""
