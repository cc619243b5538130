"""Package data of a built toolkit: templates/ and playbooks/ of the repository, copied here by setup.py
at build time (the repository keeps them top-level). Read them through toolkit.resources, never by path."""
