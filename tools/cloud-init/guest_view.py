"""What cloud-init makes of an oVirt config drive: run with Debian's cloud-init on PYTHONPATH (tools/cloud-init/fetch.sh).

    guest-view DRIVE WORK_DIR

DRIVE holds `openstack/latest/meta_data.json` and `openstack/latest/user_data` as the engine writes them. Every step
is cloud-init's own code, in the order a booting guest runs it: the ConfigDrive datasource reads the drive (from its
seed directory) and writes instance-data.json; the user-data's type is detected from its first line; a
`## template: jinja` user-data is rendered with that instance data; cloud-config is loaded with cloud-init's YAML
loader. Prints one JSON object: the cloud-init version, the instance data's host name, the type before and after
rendering, whether jinja was rendered, the final user-data and the configuration it loads to. Writes only under
WORK_DIR.
"""

import sys

# --help before cloud-init's imports, which need tools/cloud-init/fetch.sh's PYTHONPATH.
if __name__ == "__main__" and any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402

from cloudinit import distros, helpers, settings, util, version
from cloudinit.handlers import type_from_starts_with
from cloudinit.handlers.jinja_template import render_jinja_payload
from cloudinit.sources import DataSourceConfigDrive


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: guest-view DRIVE WORK_DIR")
    drive, work = sys.argv[1], sys.argv[2]
    cloud, run = os.path.join(work, "cloud"), os.path.join(work, "run")
    # The datasource reads a seed directory before any device: the drive goes there.
    shutil.copytree(drive, os.path.join(cloud, "seed", "config_drive"))
    paths = helpers.Paths({"cloud_dir": cloud, "run_dir": run, "templates_dir": work})
    distro = distros.fetch("debian")("debian", {}, paths)
    # On a first boot the datasource also writes injected files and network configuration into the running system;
    # only the data matters here, so that step is left out (this machine is not the guest).
    DataSourceConfigDrive.on_first_boot = lambda *args, **kwargs: None
    source = DataSourceConfigDrive.DataSourceConfigDrive(settings.CFG_BUILTIN, distro, paths)
    if not source.get_data():
        sys.exit("cloud-init's ConfigDrive datasource found no data on the drive")
    with open(os.path.join(run, "instance-data.json"), encoding="utf-8") as f:
        instance_data = json.load(f)
    user_data = util.decode_binary(source.get_userdata_raw())
    first_type = type_from_starts_with(user_data)
    final_type, rendered = first_type, False
    if first_type == "text/jinja2":
        user_data = render_jinja_payload(user_data, "user-data", instance_data)
        if user_data is None:
            sys.exit("cloud-init could not render the jinja user-data")
        rendered = True
        final_type = type_from_starts_with(user_data)
    config = util.load_yaml(user_data) if final_type == "text/cloud-config" else None
    json.dump(
        {
            "cloud_init_version": version.version_string(),
            "local_hostname": instance_data.get("v1", {}).get("local_hostname"),
            "first_type": first_type,
            "jinja_rendered": rendered,
            "type": final_type,
            "user_data": user_data,
            "config": config,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
