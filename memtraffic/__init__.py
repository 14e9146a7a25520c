"""memtraffic: where did my bytes go, and how far am I from the minimum?"""

__version__ = "0.1.0"
