"""Entry point for `ray job submit -- python jobs/analyze_video.py [--input PATH_OR_URI]`.

See `swarm_ray.video._job` for the options.
"""

import sys

from swarm_ray.core import SwarmUserError
from swarm_ray.video._job import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except SwarmUserError as error:  # a cluster joined without its token, say: one line
        sys.exit(f"error: {error}")
