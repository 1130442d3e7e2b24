from pathlib import Path

from barca import asset, collect, partitions_from, sensor


@sensor()
def region_list() -> list:
    return Path("regions.txt").read_text().split()


@asset(inputs={"names": region_list})
def regions(names: list) -> list:
    return names


@asset(partitions={"region": partitions_from(regions)})
def sales(region: str) -> dict:
    return {"region": region, "revenue": len(region) * 10}


@asset(inputs={"all_sales": collect(sales)})
def summary(all_sales: list[dict]) -> dict:
    return {"regions": len(all_sales), "total": sum(s["revenue"] for s in all_sales)}
