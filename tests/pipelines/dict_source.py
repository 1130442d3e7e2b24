import json
from pathlib import Path

from barca import asset, collect, partitions_from, sensor


@sensor()
def versions() -> dict:
    # {retailer: max(updated_at)}
    return json.loads(Path("versions.json").read_text())


@asset(partitions={"retailer": partitions_from(versions)})
def orders(retailer: str, versions: str) -> dict:
    return {"retailer": retailer, "seen": versions}


@asset(inputs={"all_orders": collect(orders)})
def total(all_orders: list[dict]) -> dict:
    return {"retailers": sorted(o["retailer"] for o in all_orders)}
