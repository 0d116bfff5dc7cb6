"""Harness interference: a profile hook installed for the whole process (it sees every call the timer
makes and could skew or skip them)."""
import sys

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "sys.getprofile()", "timed": True}


def _hook(frame, event, arg):
    return None


sys.setprofile(_hook)
