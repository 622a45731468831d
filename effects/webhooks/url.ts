/**
 * Which webhook URLs are accepted at creation and update. Host names are checked again at
 * delivery against every address they resolve to (the transport), because DNS can change after
 * creation; here only what the URL text itself reveals is judged.
 */
import { Result } from "effect"
import { classifyIp } from "../shared/ssrf.ts"

export const MAX_URL_LENGTH = 2048

/** The URL as given (it is stored that way), or the reason it is refused. */
export const checkWebhookUrl = (raw: string, allowPrivate: boolean): Result.Result<string, string> => {
  if (raw.length > MAX_URL_LENGTH) return Result.fail(`url must be at most ${MAX_URL_LENGTH} characters`)
  if (/[\s\u0000-\u001f]/.test(raw)) return Result.fail("url must not contain whitespace or control characters")
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Result.fail("url must be an absolute http or https URL")
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return Result.fail("url must use http or https")
  if (url.username !== "" || url.password !== "") return Result.fail("url must not contain credentials (user:password@)")
  if (url.hostname === "") return Result.fail("url must name a host")
  if (!allowPrivate) {
    // The parser already turned decimal/hex/short IPv4 forms (http://2130706433/) into dotted quads.
    const cls = classifyIp(url.hostname)
    if (cls !== undefined && cls !== "public") {
      return Result.fail(`url points at a ${cls} address; webhook targets must be publicly routable`)
    }
  }
  return Result.succeed(raw)
}
