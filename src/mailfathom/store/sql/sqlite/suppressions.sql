-- name: suppressed_among
-- The entries of the addresses in the JSON array :addresses (lower-cased).
SELECT * FROM mf_suppressions
WHERE address IN (SELECT value FROM json_each(:addresses));
