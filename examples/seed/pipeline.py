from pathlib import Path

from barca import asset, collect, partitions, partitions_from, sensor


@sensor()
def feed_version() -> str:
    # Stands in for the etag of the price feed.
    return Path("feed_version.txt").read_text().strip()


@asset(inputs={"version": feed_version},
       partitions={"ticker": partitions(["AAPL", "MSFT", "GOOG"])})
def prices(ticker: str, version: str) -> dict:
    return {"ticker": ticker, "close": float(len(ticker) * 100 + ord(ticker[0])), "feed": version}


@asset(partitions={"ticker": partitions_from(prices)})
def signal(ticker: str, prices: dict) -> dict:
    return {"ticker": ticker, "buy": prices["close"] > 470}


@asset(inputs={"signals": collect(signal)})
def report(signals: list[dict]) -> dict:
    return {"tickers": len(signals), "buys": sorted(s["ticker"] for s in signals if s["buy"])}
