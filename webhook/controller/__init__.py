"""The gang controller: lifts the gates of whole gangs at once (see issue 5)."""
