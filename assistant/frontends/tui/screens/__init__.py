"""The screens of the session, one module per step, and the dialogs."""
