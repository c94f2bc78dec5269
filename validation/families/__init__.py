"""The papers' families a candidate can claim with ``--as``, one module per method, each with its own
contract; the table and the overview in :mod:`validation.families.catalog`."""

from .catalog import FAMILIES

__all__ = ["FAMILIES"]
