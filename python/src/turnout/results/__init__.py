"""Results store: SQLite with a versioned schema, dataclasses, export."""

from .db import CampaignRef, ResultsDB
from .export import FORMATS, export
from .models import DIRECTIONS, METHODS, STATUSES, Campaign, Host, Result, Sut, Trial
from .schema import SCHEMA_VERSION, migrate, user_version

__all__ = [
    "DIRECTIONS",
    "FORMATS",
    "METHODS",
    "SCHEMA_VERSION",
    "STATUSES",
    "Campaign",
    "CampaignRef",
    "Host",
    "Result",
    "ResultsDB",
    "Sut",
    "Trial",
    "export",
    "migrate",
    "user_version",
]
