"""Evidence collectors and targeted probes. Each module collects one kind of evidence, with a
hard time bound, and never imports UI code."""
