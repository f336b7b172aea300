"""Lightning data modules and LoRA training of evaluators (installs as ``robusteval.training``).

Filled by the adversarial-training issue; present now to fix DESIGN.md's layout.
"""
