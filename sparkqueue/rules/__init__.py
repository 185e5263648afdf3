"""Pure rules: argument checks, message validation and receipt handles, shared by every layer."""
