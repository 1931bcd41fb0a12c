"""Entry point for `ray job submit -- python jobs/analyze_video.py [--input PATH_OR_URI]`.

See `swarm_ray.video._job` for the options.
"""

import sys

from swarm_ray.video._job import main

if __name__ == "__main__":
    sys.exit(main())
