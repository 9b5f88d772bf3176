"""Every ``hoodie.*`` option pyhudi understands, declared once, in one registry.

Users of Apache Hudi already know these keys; they must mean here what they mean there, with the
same defaults. :mod:`pyhudi.config.registry` holds the machinery (:class:`ConfigOption`,
:class:`HudiConfig`, parsers); the options themselves are declared by area in
:mod:`~pyhudi.config.table`, :mod:`~pyhudi.config.write`, :mod:`~pyhudi.config.services`,
:mod:`~pyhudi.config.read`, :mod:`~pyhudi.config.sync` (catalog sync) and
:mod:`~pyhudi.config.features` (options pyhudi implements in part or accepts without effect), and
all of them are reachable here as ``pyhudi.config.<NAME>``.
"""

from pyhudi.config.features import *  # noqa: F403
from pyhudi.config.read import *  # noqa: F403
from pyhudi.config.registry import *  # noqa: F403
from pyhudi.config.registry import _ALIASES, REGISTRY  # noqa: F401
from pyhudi.config.services import *  # noqa: F403
from pyhudi.config.sync import *  # noqa: F403
from pyhudi.config.table import *  # noqa: F403
from pyhudi.config.write import *  # noqa: F403
