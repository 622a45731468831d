/**
 * The one HTML escape for text and quoted attribute values we write into pages and mail bodies.
 * Single quotes are escaped too, so a value is safe in either attribute quoting.
 */
const ENTITIES: Readonly<Record<string, string>> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ENTITIES[c]!)
