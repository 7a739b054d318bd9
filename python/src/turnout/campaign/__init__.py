"""Campaigns: TOML specs expanded to work items, and the resumable runner."""

from .runner import Bench, Session, SkipSession, run_campaign
from .spec import METHODS, CampaignError, CampaignSpec, WorkItem, load, parse

__all__ = ["METHODS", "Bench", "CampaignError", "CampaignSpec", "Session", "SkipSession",
           "WorkItem", "load", "parse", "run_campaign"]
