"""The interactive session: one UI-agnostic core that the Textual app and the prompts both drive."""
