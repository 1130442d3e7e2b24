from barca import asset, collect, partitions, partitions_from

REGIONS = ["emea", "amer", "apac"]


@asset(partitions={"region": partitions(REGIONS)})
def sales(region: str) -> dict:
    return {"region": region, "revenue": len(region) * 10}


@asset(partitions={"region": partitions_from(sales)})
def margin(region: str, sales: dict) -> dict:
    return {"region": region, "margin": sales["revenue"] // 4}


@asset(inputs={"all_sales": collect(sales)})
def summary(all_sales: list[dict]) -> dict:
    return {"regions": len(all_sales), "total": sum(s["revenue"] for s in all_sales)}
