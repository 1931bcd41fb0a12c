"""Entry point for `ray job submit -- python jobs/compare_documents.py [--input DIR_OR_URI]`.

See `swarm_ray.documents._job` (also `swarm-ray compare`) for the options.
"""

import sys

from swarm_ray.core import SwarmUserError
from swarm_ray.documents._job import main

if __name__ == "__main__":
    try:
        sys.exit(main())
    except SwarmUserError as error:  # a cluster joined without its token, say: one line
        sys.exit(f"error: {error}")
