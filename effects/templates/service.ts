/**
 * Templates: stored subject and bodies with `{{key}}` placeholders, rendered at send time
 * (effects/outbound). Names are unique per account, so a template can be told apart in a list.
 */
import { Clock, Context, Effect, Layer } from "effect"
import { Conflict, type Forbidden, type LimitReached, NotFound } from "../errors.ts"
import { Database, type DbError, isUniqueViolation } from "../ports/Database.ts"
import { insertWithinCap } from "../shared/caps.ts"
import { owned } from "../shared/ownership.ts"
import { type CreateTemplateBody, type ReplaceTemplateBody, type Template, type TemplateRow, toTemplate } from "./schema.ts"

/** Templates an account may keep (409 LIMIT_REACHED past it), as it may keep 100 addresses. */
export const MAX_TEMPLATES = 100

export interface TemplatesShape {
  readonly create: (userId: number, body: CreateTemplateBody) => Effect.Effect<Template, Conflict | LimitReached | DbError>
  /** The account's templates, oldest first. */
  readonly list: (userId: number) => Effect.Effect<ReadonlyArray<Template>, DbError>
  readonly get: (userId: number, id: number) => Effect.Effect<Template, NotFound | Forbidden | DbError>
  /** Full replacement: every field is set from `body`. */
  readonly replace: (userId: number, id: number, body: ReplaceTemplateBody) => Effect.Effect<Template, NotFound | Forbidden | Conflict | DbError>
  readonly remove: (userId: number, id: number) => Effect.Effect<void, NotFound | Forbidden | DbError>
  /** The row a send renders from (404 unknown, 403 another account's). */
  readonly forSend: (userId: number, id: number) => Effect.Effect<TemplateRow, NotFound | Forbidden | DbError>
}

const duplicateName = (name: string) => new Conflict({ message: `a template named "${name}" already exists`, field: "name" })

export class Templates extends Context.Service<Templates, TemplatesShape>()("app/Templates") {
  static readonly layer = Layer.effect(
    Templates,
    Effect.gen(function*() {
      const db = yield* Database
      const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(Number(ms)))

      const ownedTemplate = (userId: number, id: number) =>
        Effect.flatMap(db.query<TemplateRow>("SELECT * FROM templates WHERE id = $1", [id]), (rows) => owned("template", rows, userId))

      const onDuplicate = (name: string) => (e: DbError): Effect.Effect<never, Conflict | DbError> =>
        Effect.fail(isUniqueViolation(e) ? duplicateName(name) : e)

      const create = Effect.fn("Templates.create")(function*(userId: number, body: CreateTemplateBody) {
        const at = yield* now
        const row = yield* insertWithinCap(db, {
          table: "templates", per: ["user_id", userId], max: MAX_TEMPLATES, message: `an account can have at most ${MAX_TEMPLATES} templates`,
        }, Effect.map(db.query<TemplateRow>(
          `INSERT INTO templates (user_id, name, subject, html_body, text_body, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $6) RETURNING *`,
          [userId, body.name, body.subject ?? null, body.html_body ?? null, body.text_body ?? null, at],
        ), (rows) => rows[0]!)).pipe(Effect.catchTag("DbError", onDuplicate(body.name)))
        return toTemplate(row)
      })

      const list = Effect.fn("Templates.list")(function*(userId: number) {
        const rows = yield* db.query<TemplateRow>("SELECT * FROM templates WHERE user_id = $1 ORDER BY id", [userId])
        return rows.map(toTemplate)
      })

      const get = Effect.fn("Templates.get")(function*(userId: number, id: number) {
        return toTemplate(yield* ownedTemplate(userId, id))
      })

      const replace = Effect.fn("Templates.replace")(function*(userId: number, id: number, body: ReplaceTemplateBody) {
        yield* ownedTemplate(userId, id)
        const [row] = yield* db.query<TemplateRow>(
          `UPDATE templates SET name = $2, subject = $3, html_body = $4, text_body = $5, updated_at = $6
            WHERE id = $1 RETURNING *`,
          [id, body.name, body.subject, body.html_body, body.text_body, yield* now],
        ).pipe(Effect.catchTag("DbError", onDuplicate(body.name)))
        if (!row) return yield* new NotFound({ message: "template not found" })
        return toTemplate(row)
      })

      const remove = Effect.fn("Templates.remove")(function*(userId: number, id: number) {
        yield* ownedTemplate(userId, id)
        yield* db.query("DELETE FROM templates WHERE id = $1", [id])
      })

      return Templates.of({ create, list, get, replace, remove, forSend: ownedTemplate })
    }),
  )
}
