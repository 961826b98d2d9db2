"""nbval runs the exercise notebook with the reference solutions plugged in.

The checker (``minispec.lab.exercises``) honours ``MINISPEC_PLUG_SOLUTIONS=1`` only
for exercise cells that are still the empty stub, and raises if a plugged solution
fails its check. The kernel nbval starts inherits this process's environment.
"""

import os

os.environ["MINISPEC_PLUG_SOLUTIONS"] = "1"
