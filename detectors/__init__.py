"""Input-sanitization detectors and the guard wrapper (installs as ``robusteval.detectors``).

The detectors themselves arrive with the detectors-and-guards issue; this package exists now
so the layout of DESIGN.md (top-level ``detectors/`` importable as ``robusteval.detectors``)
is fixed from the start.
"""
